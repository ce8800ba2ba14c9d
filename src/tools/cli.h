/* The `nabla` command-line tool: one file per subcommand. */
#ifndef NABLA_CLI_H
#define NABLA_CLI_H

int cmd_ops(int argc, char **argv);
int cmd_gradcheck(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_npy(int argc, char **argv);
int cmd_onnx_export(int argc, char **argv);
int cmd_onnx_import(int argc, char **argv);
int cmd_mem(int argc, char **argv);

#endif
