/* nabla gradcheck [--second | --jvp | --closure] [--verbose] [OP...]: checks
 * every op that has a VJP rule (or the named ones) against central finite
 * differences in float64; with --second, the gradient of the gradient; with
 * --jvp, the op's JVP rule (against finite differences and against its VJP);
 * with --closure, that every op its rules emit has rules of its own. Prints
 * a line per op and ends with "N passed, M failed". */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "nabla/gradcheck.h"
#include "cli.h"
#include "gradcheck/cases.h"

static const nb_gradcheck_case *const tables[] = {
    nb_gc_elementwise, nb_gc_compare, nb_gc_reduce, nb_gc_linalg,    nb_gc_shape,    nb_gc_nn,
    nb_gc_conv,        nb_gc_norm,    nb_gc_rnn,    nb_gc_attention, nb_gc_creation, nb_gc_collective,
};

static bool wanted(const char *op, int argc, char **argv)
{
    bool any = false;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        any = true;
        if (!strcmp(argv[i], op)) return true;
    }
    return !any;
}

/* Runs every case of one op; returns true if all pass. */
static bool check_op(const nb_op_def *def, int order, bool verbose)
{
    if (order >= 3 && !def->jvp && !def->expand) {
        printf("FAIL %-33s no JVP rule for an op with a VJP rule\n", def->name);
        return false;
    }
    int cases = 0, elements = 0, failed = 0, skipped = 0;
    double worst = 0;
    char where[300] = "";
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const nb_gradcheck_case *c = tables[t]; c->op; c++) {
            if (strcmp(c->op, def->name)) continue;
            if (order == 2 && c->skip_second_order) {
                skipped++;
                continue;
            }
            cases++;
            nb_gradcheck_report rep;
            uint64_t seed = 1234 + (uint64_t)cases;
            nb_status st = order == 4 ? nb_gradcheck_closure(c, seed, &rep)
                : order == 3          ? nb_gradcheck_op_jvp(c, seed, &rep)
                                      : nb_gradcheck_op(c, order, seed, &rep);
            if (st) {
                failed++;
                snprintf(where, sizeof where, "case '%s': %s", c->name ? c->name : "", nb_last_error());
                continue;
            }
            elements += rep.checked;
            if (rep.failed) {
                failed++;
                snprintf(where, sizeof where, "case '%s': %s", c->name ? c->name : "", rep.worst);
            }
            if (rep.max_abs_err > worst) worst = rep.max_abs_err;
            if (verbose)
                printf("       %-33s %s: %d elements, max error %.2e\n", def->name, c->name ? c->name : "", rep.checked,
                       rep.max_abs_err);
        }
    if (cases == 0 && skipped) {
        printf("skip %-33s (its rule emits ops without rules of their own)\n", def->name);
        return true;
    }
    if (cases == 0) {
        printf("FAIL %-33s no gradcheck case for an op with a VJP rule\n", def->name);
        return false;
    }
    if (failed) {
        printf("FAIL %-33s %d/%d cases failed; %s\n", def->name, failed, cases, where);
        return false;
    }
    if (order == 4)
        printf("ok   %-33s %d case%s: every op its rules emit has rules (%d op types met over the cases)\n", def->name,
               cases, cases == 1 ? "" : "s", elements);
    else
        printf("ok   %-33s %d case%s, %d elements, max error %.1e\n", def->name, cases, cases == 1 ? "" : "s", elements,
               worst);
    return true;
}

/* ---- the matrix (--all) ---------------------------------------------------- */

enum {
    COL_VJP,
    COL_SECOND,
    COL_THIRD,
    COL_JVP,
    COL_FWD_REV,
    COL_CLOSURE,
    COL_SHAPES,
    COL_ABSENT,
    COL_F32,
    COL_EAGER,
    COL_TRANSFORMS,
    COL_VMAP,
    N_COLS
};
static const char *const col_names[N_COLS] = {"vjp", "2nd", "3rd", "jvp", "fwr", "clo",
                                              "shp", "abs", "f32", "egr", "trf", "vmp"};
#define F32_TOL 1e-4 /* float32 values against float64, relative and absolute */

static nb_status run_column(int col, const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    switch (col) {
    case COL_VJP: return nb_gradcheck_op(c, 1, seed, rep);
    case COL_SECOND: return nb_gradcheck_op(c, 2, seed, rep);
    case COL_THIRD: return nb_gradcheck_op(c, 3, seed, rep);
    case COL_JVP: return nb_gradcheck_op_jvp(c, seed, rep);
    case COL_FWD_REV: return nb_gradcheck_fwd_over_rev(c, seed, rep);
    case COL_CLOSURE: return nb_gradcheck_closure(c, seed, rep);
    case COL_SHAPES: return nb_gradcheck_shapes(c, seed, rep);
    case COL_ABSENT: return nb_gradcheck_absent(c, seed, rep);
    case COL_F32: return nb_gradcheck_f32(c, seed, F32_TOL, rep);
    case COL_EAGER: return nb_gradcheck_eager(c, seed, rep);
    case COL_TRANSFORMS: return nb_gradcheck_transforms(c, seed, rep);
    default: return nb_gradcheck_vmap(c, seed, rep);
    }
}

/* One line for the op, a column per check (ok, FAIL, or - where a column
 * does not apply), then a line per failure. */
static bool check_op_all(const nb_op_def *def)
{
    bool col_ok[N_COLS], all = true;
    int cases = 0;
    char why[N_COLS][360] = {{0}};
    for (int k = 0; k < N_COLS; k++) col_ok[k] = true;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const nb_gradcheck_case *c = tables[t]; c->op; c++) {
            if (strcmp(c->op, def->name)) continue;
            cases++;
            for (int k = 0; k < N_COLS; k++) {
                if ((k == COL_SECOND || k == COL_THIRD) && c->skip_second_order) continue;
                nb_gradcheck_report rep;
                nb_status st = run_column(k, c, 1234 + (uint64_t)cases, &rep);
                if (!st && !rep.failed) continue;
                col_ok[k] = false;
                snprintf(why[k], sizeof why[k], "case '%s': %s", c->name ? c->name : "",
                         st ? nb_last_error() : rep.worst);
            }
        }
    if (!cases) {
        printf("FAIL %-33s no gradcheck case for an op with a VJP rule\n", def->name);
        return false;
    }
    for (int k = 0; k < N_COLS; k++) all &= col_ok[k];
    printf("%s %-33s", all ? "ok  " : "FAIL", def->name);
    for (int k = 0; k < N_COLS; k++) printf(" %-4s", col_ok[k] ? "ok" : "FAIL");
    printf(" %d case%s\n", cases, cases == 1 ? "" : "s");
    for (int k = 0; k < N_COLS; k++)
        if (!col_ok[k]) printf("       %s: %s\n", col_names[k], why[k]);
    return all;
}

int cmd_gradcheck(int argc, char **argv)
{
    int order = 1;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--second")) order = 2;
        else if (!strcmp(argv[i], "--jvp")) order = 3;
        else if (!strcmp(argv[i], "--closure")) order = 4;
        else if (!strcmp(argv[i], "--all")) order = 5;
        else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) verbose = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf(
                "usage: nabla gradcheck [--second | --jvp | --closure | --all] [--verbose] [OP...]\n\n"
                "Checks the gradient rule of every op (or the named ones) against central\n"
                "finite differences in float64; --second checks the gradient of the gradient;\n"
                "--jvp checks the forward-mode (JVP) rule against finite differences and\n"
                "against the VJP rule, by <JVP(t), w> = <t, VJP(w)>; --closure checks that\n"
                "every op the rules emit (in reverse mode, reverse over reverse and forward\n"
                "mode) has a VJP and a JVP rule or is marked as having a zero derivative,\n"
                "and that every registered op is, so that derivatives go to any order.\n"
                "--all runs the whole matrix, a column per check: vjp (first order), 2nd\n"
                "(reverse over reverse), 3rd (three reverse passes), jvp (forward mode and the adjoint identity), fwr\n"
                "(forward over reverse against reverse over reverse), clo (closure), shp\n"
                "(gradient dtypes and shapes), abs (absent output gradients), f32 (float32\n"
                "values within 1e-4 of float64), egr (the eager tape, on contiguous and\n"
                "strided inputs and output gradients, against the program), trf (nb_grad\n"
                "of the op as a function against the program), vmp (the op under vmap by its\n"
                "batching rule against a loop over the examples, every in_axes combination).\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "nabla gradcheck: unknown option %s\n", argv[i]);
            return 2;
        } else if (!nb_op_find(argv[i])) {
            fprintf(stderr, "nabla gradcheck: no op named '%s'\n", argv[i]);
            return 2;
        }
    }
    int passed = 0, failed = 0;
    if (order == 5) {
        printf("     %-33s", "op");
        for (int k = 0; k < N_COLS; k++) printf(" %-4s", col_names[k]);
        printf("\n");
    }
    if (order >= 4)
        for (int i = 0; i < nb_op_count(); i++) {
            const nb_op_def *def = nb_op_at(i);
            if (nb_op_rules_closed(def) || !wanted(def->name, argc, argv)) continue;
            printf("FAIL %-33s %s, and it is not marked as having a zero derivative\n", def->name,
                   !def->vjp && !def->jvp ? "no VJP or JVP rule"
                       : !def->vjp        ? "no VJP rule"
                                          : "no JVP rule");
            failed++;
        }
    for (int i = 0; i < nb_op_count(); i++) {
        const nb_op_def *def = nb_op_at(i);
        if ((!def->vjp && !def->expand) || !wanted(def->name, argc, argv)) continue;
        if (def->flags & NB_OP_CONTROL) {
            /* One op cannot run alone: it needs its sub-blocks. */
            printf("prog %-33s checked on whole programs by tests/test_control.c\n", def->name);
            continue;
        }
        if (order == 5 ? check_op_all(def) : check_op(def, order, verbose)) passed++;
        else failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
