/* What new users tripped over, each kept from coming back: values of one
 * mode handed to the other, ... */
#include "test.h"

/* An eager value given to a record builder (or the reverse) is an error that
 * names the call, not a tensor read as a var. */
static void test_values_know_their_mode(void)
{
    nb_program *p;
    nb_builder *rec, *eager;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&rec, p, NULL));
    REQUIRE_OK(nb_builder_new_eager(&eager));
    nb_tensor *t = T(NB_F32, S(2), 1, 2);
    nb_value ev = nb_eager_value(eager, t);
    nb_value rv = nb_layer_data(rec, "x", NB_F32, 1, S(2));
    CHECK(nb_is_none(nb_relu(rec, ev)));
    CHECK(nb_builder_status(rec) == NB_ERR_ARG);
    CHECK(strstr(nb_builder_error(rec), "emit relu: input 0 is an eager tensor (an eager builder's value), but this is a "
                                        "record builder"));
    CHECK(nb_is_none(nb_add(eager, rv, ev)));
    CHECK(strstr(nb_builder_error(eager), "emit add: input 0 is a var of a program (a record builder's value), but this "
                                          "is an eager builder"));
    CHECK(nb_value_name(ev) == NULL);
    CHECK(strstr(nb_last_error(), "nb_value_name: an eager tensor has no name"));
    CHECK(nb_value_var(NB_NONE) == NULL);
    CHECK(strstr(nb_last_error(), "nb_value_var: the value is NB_NONE"));
    CHECK(nb_eager_tensor(rv) == NULL);
    CHECK(strstr(nb_last_error(), "nb_eager_tensor: the value is a var of a program"));
    CHECK(nb_eager_tensor(ev) == t);
    CHECK_STR(nb_value_name(rv), "x");
    nb_tensor_release(t);
    nb_builder_free(rec);
    nb_builder_free(eager);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_values_know_their_mode);
    return test_report();
}
