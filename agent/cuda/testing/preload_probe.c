/* preload_probe.c: a plain program (no CUDA) for no_driver_test: whatever
 * is preloaded into it, it must print exactly this and exit with status 3. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  char line[256];
  int lines = 0;
  while (fgets(line, sizeof(line), stdin) != NULL) ++lines;
  printf("probe: %d arguments, %d input lines, HOME %s\n", argc - 1, lines,
         getenv("HOME") != NULL ? "set" : "unset");
  for (int i = 1; i < argc; ++i) printf("arg %d: %s\n", i, argv[i]);
  fprintf(stderr, "probe: a line on stderr\n");
  return 3;
}
