/*
 * commands.h - the driver's subcommands. Each takes its own argv (argv[0] is the
 * subcommand's name) and returns an exit status (cli.h).
 */
#ifndef GR_COMMANDS_H
#define GR_COMMANDS_H

int gr_cmd_demo(int argc, char **argv);
int gr_cmd_bench(int argc, char **argv);
int gr_cmd_bench_io(int argc, char **argv); /* bench --io DIR (iobench.c) */
int gr_cmd_run(int argc, char **argv);
int gr_cmd_check(int argc, char **argv);
int gr_cmd_info(int argc, char **argv);
int gr_cmd_stress(int argc, char **argv);

#endif /* GR_COMMANDS_H */
