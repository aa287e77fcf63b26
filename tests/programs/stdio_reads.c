/*
 * Reads one file through each stdio read function (tests/test_stdio_lazy.py), each from
 * a new stream, and prints what it read as a count and a checksum: fread in odd sizes,
 * fgets with a small buffer, getline, getdelim, fgetc, getc_unlocked (the macro, which
 * calls __uflow when the buffer is empty), fscanf, fgetwc and a seek into the middle.
 * Usage: stdio_reads FILE [MODE]   (fopen's mode, "r" unless given: "r+" gives a stream of
 * glibc's own on a cached file, "r" a cookie stream; native/interpose/stdio.c)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static unsigned long sum;
static unsigned long count;
static const char *mode = "r";

static void add(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        sum = sum * 31 + b[i];
    count += n;
}

static FILE *open_or_die(const char *path)
{
    FILE *f = fopen(path, mode);
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    sum = count = 0;
    return f;
}

static void report(const char *what, FILE *f)
{
    printf("%-12s %lu %lx%s\n", what, count, sum, ferror(f) ? " ERROR" : "");
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *path = argv[1];
    if (argc > 2)
        mode = argv[2];
    char buf[70000];
    FILE *f = open_or_die(path);
    size_t n;
    while ((n = fread(buf, 1, 7919, f)) > 0)
        add(buf, n);
    report("fread", f);

    f = open_or_die(path);
    while (fgets(buf, 100, f))
        add(buf, strlen(buf));
    report("fgets", f);

    f = open_or_die(path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0)
        add(line, (size_t)len);
    report("getline", f);

    f = open_or_die(path);
    while ((len = getdelim(&line, &cap, 'q', f)) > 0)
        add(line, (size_t)len);
    report("getdelim", f);
    free(line);

    f = open_or_die(path);
    int c;
    while ((c = fgetc(f)) != EOF) {
        unsigned char b = (unsigned char)c;
        add(&b, 1);
    }
    report("fgetc", f);

    f = open_or_die(path);
    while ((c = getc_unlocked(f)) != EOF) {
        unsigned char b = (unsigned char)c;
        add(&b, 1);
    }
    report("getc_unlock", f);

    f = open_or_die(path);
    while (fscanf(f, "%1000s", buf) == 1)
        add(buf, strlen(buf));
    report("fscanf", f);

    f = open_or_die(path);
    wint_t w;
    while ((w = fgetwc(f)) != WEOF)
        add(&w, sizeof w);
    report("fgetwc", f);

    f = open_or_die(path);
    fseek(f, -100000, SEEK_END);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        add(buf, n);
    report("fseek+fread", f);
    return 0;
}
