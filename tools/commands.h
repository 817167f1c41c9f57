/* SPDX-License-Identifier: MIT */
/* The rdps tool's subcommands. Each takes (argc, argv) with argv[0] the
 * subcommand name, prints its own --help, and returns the process exit code
 * (0 ok, 1 failure, 2 usage error). */
#ifndef RDPS_TOOLS_COMMANDS_H
#define RDPS_TOOLS_COMMANDS_H

#include <stdbool.h>

int rdps_cmd_server(int argc, char **argv);
int rdps_cmd_stats(int argc, char **argv);
int rdps_cmd_shutdown(int argc, char **argv);
int rdps_cmd_ckpt(int argc, char **argv);
int rdps_cmd_train(int argc, char **argv);
int rdps_cmd_dataset(int argc, char **argv);
int rdps_cmd_partition(int argc, char **argv);
int rdps_cmd_launch(int argc, char **argv);
/* DGL's launch.py line on rdps launch (tools/launch_dgl.c). */
bool rdps_launch_dgl_wants(int argc, char **argv);
int rdps_launch_dgl(int argc, char **argv);
int rdps_cmd_doctor(int argc, char **argv);
int rdps_cmd_bench(int argc, char **argv);
int rdps_cmd_eval(int argc, char **argv);
int rdps_cmd_predict(int argc, char **argv);
int rdps_cmd_emb_sim(int argc, char **argv);

struct rdps_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

#endif
