/*
 * replay.c - runs a libFuzzer target over files, without libFuzzer: the corpus as a
 * regression test, built by the ordinary toolchain (gcc) so it also runs under the asan,
 * tsan and ubsan configs.
 *
 *   replay NAME PATH...   each PATH a file or a directory of files (not recursive)
 *
 * Prints the count, then "PASS NAME" (tests/testing.h's format); a broken invariant aborts in
 * the target, a sanitizer report ends the process: either way the test fails with the file
 * being replayed named on stderr.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Replay one file; 0 when it could not be read. */
static int replay_file(const char *path)
{
    struct stat sb;
    uint8_t *data;
    size_t got;
    FILE *f;

    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (f = fopen(path, "rb")) == NULL)
        return 0;
    /* Exactly the file's size, so ASan sees any read past the end. */
    data = malloc(sb.st_size ? (size_t)sb.st_size : 1);
    if (data == NULL) {
        fclose(f);
        return 0;
    }
    got = fread(data, 1, (size_t)sb.st_size, f);
    fclose(f);
    fprintf(stderr, "replay %s\n", path);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    return 1;
}

int main(int argc, char **argv)
{
    struct dirent *e;
    char path[4096];
    long n = 0;
    DIR *d;

    if (argc < 3) {
        fprintf(stderr, "usage: %s NAME PATH...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if ((d = opendir(argv[i])) == NULL) {
            if (!replay_file(argv[i])) {
                printf("FAIL %s: cannot read %s\n", argv[1], argv[i]);
                return 1;
            }
            n++;
            continue;
        }
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            n += replay_file(path);
        }
        closedir(d);
    }
    if (n == 0) {
        printf("FAIL %s: no inputs found\n", argv[1]);
        return 1;
    }
    printf("    %ld inputs replayed\nPASS %s\n", n, argv[1]);
    return 0;
}
