/* pause: the process of the e2e cluster's pod sandbox image (no registry, so no
 * registry.k8s.io/pause). Like upstream's pause it holds the pod's namespaces, reaps the
 * zombies it inherits as PID 1 of the pod, and exits 0 on SIGINT/SIGTERM. Built static so
 * the image needs nothing else. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(void)
{
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};

    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0)
        return 1;
    for (;;)
        pause();
}
