/* The backend-independent half of the builder: first-error bookkeeping and
 * nb_emit's checks. Everything that depends on what a value is goes through
 * the backend's vtable. */
#include <stdarg.h>
#include "nabla/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/kernel.h"
#include "builder_internal.h"

nb_status nb_builder_init(nb_builder **out, const nb_builder_backend *backend)
{
    *out = nb_calloc(1, sizeof **out);
    if (!*out) return nb_error(NB_ERR_NOMEM, "builder: out of memory");
    (*out)->backend = backend;
    return NB_OK;
}

void nb_builder_free(nb_builder *b)
{
    if (!b) return;
    if (b->backend->destroy) b->backend->destroy(b);
    nb_free(b);
}

nb_status nb_builder_record_error(nb_builder *b, nb_status st)
{
    if (st && !b->status) {
        b->status = st;
        snprintf(b->error, sizeof b->error, "%s", nb_last_error());
    }
    return b->status;
}

nb_status nb_builder_status(const nb_builder *b)
{
    return b ? b->status : nb_error(NB_ERR_ARG, "builder status: the builder is NULL");
}
const char *nb_builder_error(const nb_builder *b) { return b ? b->error : "builder is NULL"; }

void nb_builder_clear_error(nb_builder *b)
{
    b->status = NB_OK;
    b->error[0] = '\0';
}

nb_status nb_builder_fail(nb_builder *b, nb_status s, const char *fmt, ...)
{
    if (b->status) return b->status;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nb_error(s, "%s", msg);
    return nb_builder_record_error(b, s);
}

bool nb_builder_is_eager(const nb_builder *b) { return b->site == NULL; }

static const char *kind_name(nb_value_kind k)
{
    return k == NB_VALUE_VAR   ? "a var of a program (a record builder's value)"
        : k == NB_VALUE_TENSOR ? "an eager tensor (an eager builder's value)"
                               : "an untagged value";
}

nb_status nb_builder_check_value(const nb_builder *b, nb_value v, const char *what)
{
    if (nb_is_none(v) || v.kind == b->backend->kind) return NB_OK;
    return nb_error(NB_ERR_ARG, "%s is %s, but this is %s builder", what, kind_name(v.kind),
                    b->backend->kind == NB_VALUE_VAR ? "a record" : "an eager");
}

/* Every input must be a value of the builder's kind. */
static nb_status check_inputs(const nb_builder *b, const char *type, int n_in, const nb_value *in)
{
    for (int i = 0; i < n_in; i++)
        if (!nb_is_none(in[i]) && in[i].kind != b->backend->kind) {
            char what[160];
            snprintf(what, sizeof what, "emit %s: input %d", type, i);
            return nb_builder_check_value(b, in[i], what);
        }
    return NB_OK;
}

/* What nb_emit and nb_emit_into check before the backend sees the op. */
static nb_status check_emit(nb_builder *b, const char *type, nb_values ins, nb_attrs as, int n_out, nb_value *out)
{
    for (int i = 0; i < n_out && out; i++) out[i] = NB_NONE;
    if (!b) return nb_error(NB_ERR_ARG, "emit %s: builder is NULL", type ? type : "?");
    if (b->status) return b->status;
    if (!type) return nb_builder_record_error(b, nb_error(NB_ERR_NOT_FOUND, "unknown op '(null)'"));
    if (ins.n < 0 || n_out < 1 || (ins.n && !ins.v) || !out || (as.n && !as.v))
        return nb_builder_record_error(b, nb_error(NB_ERR_ARG, "emit %s: bad argument counts or NULL arrays", type));
    return nb_builder_record_error(b, check_inputs(b, type, ins.n, ins.v));
}

nb_status nb_emit(nb_builder *b, const char *type, nb_values ins, nb_attrs as, int n_out, nb_value *out)
{
    nb_status st = check_emit(b, type, ins, as, n_out, out);
    if (st) return st;
    return nb_builder_record_error(b, b->backend->emit(b, type, ins.n, ins.v, as.n, as.v, n_out, out));
}

nb_status nb_emit_into(nb_builder *b, const char *type, nb_values ins, nb_attrs as, int n_out, nb_value *out,
                       const nb_value *into)
{
    nb_status st = check_emit(b, type, ins, as, n_out, out);
    if (st) return st;
    if (!into)
        return nb_builder_record_error(b, nb_error(NB_ERR_ARG, "emit %s: the list of state outputs is NULL", type));
    if ((st = check_inputs(b, type, n_out, into))) return nb_builder_record_error(b, st);
    if (!b->backend->emit_into)
        return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "emit %s: a %s builder cannot write outputs into state", type,
                               b->backend->name);
    return nb_builder_record_error(b, b->backend->emit_into(b, type, ins, as, n_out, out, into));
}

nb_value nb_builder_state(nb_builder *b, const nb_state_spec *spec)
{
    if (!b || b->status) return NB_NONE;
    if (!b->backend->state) {
        nb_builder_fail(b, NB_ERR_UNSUPPORTED, "%s %s: a %s builder holds no parameters or state", spec->what,
                        spec->name, b->backend->name);
        return NB_NONE;
    }
    nb_value v = b->backend->state(b, spec);
    if (nb_is_none(v) && !b->status)
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: %s", spec->what, spec->name, nb_last_error());
    return v;
}

const nb_tensor *nb_value_known(const nb_builder *b, nb_value v)
{
    return b && v.kind == NB_VALUE_TENSOR && v.kind == b->backend->kind ? v.p : NULL;
}

const char *nb_value_label(const nb_builder *b, nb_value v)
{
    bool named = b && !nb_is_none(v) && v.kind == b->backend->kind && b->backend->name_of;
    const char *name = named ? b->backend->name_of(v) : NULL;
    return name ? name : "";
}

nb_value nb_emit1(nb_builder *b, const char *type, nb_values ins, nb_attrs as)
{
    int n_in = ins.n, n_attrs = as.n;
    const nb_value *in = ins.v;
    const nb_attr *attrs = as.v;
    /* Every declared output gets a value, so that multi-output ops run whole. */
    nb_value outs[NB_MAX_SLOTS];
    for (int i = 0; i < NB_MAX_SLOTS; i++) outs[i] = NB_NONE;
    if (!b) {
        nb_error(NB_ERR_ARG, "emit %s: builder is NULL", type ? type : "?");
        return NB_NONE;
    }
    if (b->status) return NB_NONE;
    if (!type) {
        nb_builder_record_error(b, nb_error(NB_ERR_NOT_FOUND, "unknown op '(null)'"));
        return NB_NONE;
    }
    if (n_in < 0 || (n_in && !in) || (n_attrs && !attrs)) {
        nb_builder_record_error(b, nb_error(NB_ERR_ARG, "emit %s: bad argument counts or NULL arrays", type));
        return NB_NONE;
    }
    if (nb_builder_record_error(b, check_inputs(b, type, n_in, in))) return NB_NONE;
    if (nb_builder_record_error(b, b->backend->emit(b, type, n_in, in, n_attrs, attrs, -1, outs))) return NB_NONE;
    return outs[0];
}

nb_var_info nb_value_info(const nb_builder *b, nb_value v)
{
    if (!b || nb_is_none(v) || v.kind != b->backend->kind) return (nb_var_info){.dtype = NB_F32, .ndim = 0};
    return b->backend->info(b, v);
}

nb_status nb_builder_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size)
{
    if (!b) return nb_error(NB_ERR_ARG, "unique name: builder is NULL");
    return b->backend->unique_name(b, prefix, buf, size);
}
