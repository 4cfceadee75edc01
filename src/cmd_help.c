/* The end of --help: what the process's exit codes mean and what each signal does to
 * `serve`. The codes come from their table (commands.h); the signals are the ones
 * cmd_serve.c blocks and reads from its signalfd, and a test checks that the two lists
 * agree. */
#include "commands.h"

void cmd_print_help_epilogue(FILE *f)
{
    fprintf(f, "\nExit codes:\n");
#define GDP_EXIT_HELP(name, value, text) fprintf(f, "  %d  %s\n", value, text);
    GDP_EXIT_CODES(GDP_EXIT_HELP)
#undef GDP_EXIT_HELP
    fprintf(f,
            "\nSignals (serve):\n"
            "  SIGHUP   reload: read the flags' config file (or the per-node config) again and "
            "rediscover the GPUs; a bad config is refused and the running one kept; a setting "
            "that takes effect only at start is named in a warning\n"
            "  SIGTERM  stop gracefully: close the plugin sockets, remove what serve wrote "
            "(the feature file), exit 0\n"
            "  SIGINT   the same as SIGTERM\n"
            "  SIGQUIT  the same as SIGTERM\n"
            "  SIGPIPE  ignored (a peer that went away is handled where it is written to)\n");
}
