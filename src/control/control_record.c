/* The record-builder forms of the control-flow helpers. */
#include "control_internal.h"

nb_status nb_control_record_while(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                                  const nb_value *init, nb_value *final)
{
    (void)cond, (void)body, (void)ctx, (void)n_carry, (void)init, (void)final;
    return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "while_loop: not yet in static programs");
}

nb_status nb_control_record_cond(nb_builder *b, nb_value pred, nb_branch_fn then_fn, nb_branch_fn else_fn, void *ctx,
                                 int n_in, const nb_value *in, int n_out, nb_value *out)
{
    (void)pred, (void)then_fn, (void)else_fn, (void)ctx, (void)n_in, (void)in, (void)n_out, (void)out;
    return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "cond: not yet in static programs");
}

nb_status nb_control_record_scan(nb_builder *b, nb_step_fn step, void *ctx, int n_carry, const nb_value *init, int n_xs,
                                 const nb_value *xs, int n_ys, nb_value *final, nb_value *ys, bool reverse)
{
    (void)step, (void)ctx, (void)n_carry, (void)init, (void)n_xs, (void)xs, (void)n_ys, (void)final, (void)ys, (void)reverse;
    return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "scan: not yet in static programs");
}

nb_status nb_control_record_net(nb_builder *b, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out,
                                nb_value *out)
{
    (void)fn, (void)ctx, (void)n_in, (void)in, (void)n_out, (void)out;
    return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "net: not yet in static programs");
}
