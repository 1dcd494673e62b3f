/*
 * The pod sandbox ("pause") image for a local node, and the do-nothing
 * demo sidecar: holds the pod's namespaces, reaps orphans, exits on
 * SIGINT/SIGTERM. The same job as Kubernetes' build/pause/linux/pause.c,
 * built here because no registry can be reached. Static (musl-gcc -static).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("pause: sleeps until SIGINT or SIGTERM, reaping orphans");
    return 0;
  }
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
      sigaction(SIGCHLD, &on_child, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) pause();
}
