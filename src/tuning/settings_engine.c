/* llama-server, driven by the settings layer (settings_engine.h): a child
 * process in its own process group, spoken to over HTTP/1.1 on the
 * loopback interface (Connection: close, one request a connection), its
 * output in a log file. Every wait polls the stop flag, so a Ctrl-C ends a
 * run within a fraction of a second whatever the engine is doing. */
#define _GNU_SOURCE
#include "settings_engine.h"
#include "sha256.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

extern char **environ;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL); /* a signal cuts it short: the caller polls the stop flag next */
}

static bool stopped(volatile int *stop) { return stop && *stop; }

void st_engine_last_words(const char *log_path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(log_path, "rb");
    if (!f) return;
    /* the tail is enough: the reason is among the last lines */
    char tail[16384];
    if (fseek(f, 0, SEEK_END) == 0) {
        const long size = ftell(f);
        fseek(f, size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0, SEEK_SET);
    }
    const size_t got = fread(tail, 1, sizeof tail - 1, f);
    fclose(f);
    tail[got] = '\0';
    /* of the last 40 lines, the first naming an error (the cause: "error
     * loading model: ...", before the "exiting due to ... error" that
     * follows it), else the last non-empty one */
    int n_lines = 0;
    for (const char *c = tail; *c; c++) n_lines += *c == '\n';
    const char *last = NULL, *err = NULL;
    size_t last_n = 0, err_n = 0;
    int line_no = 0;
    for (char *p = tail; *p; line_no++) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' ')) len--;
        if (len) {
            last = p;
            last_n = len;
            char line[1024];
            const size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
            memcpy(line, p, m);
            line[m] = '\0';
            if (!err && line_no + 40 >= n_lines &&
                (strcasestr(line, "error") || strcasestr(line, "failed") || strcasestr(line, "invalid") ||
                 strcasestr(line, "cannot") || strcasestr(line, "abort"))) {
                err = p;
                err_n = len;
            }
        }
        if (!e) break;
        p = e + 1;
    }
    const char *w = err ? err : last;
    const size_t wn = err ? err_n : last_n;
    if (!w) return;
    const size_t m = wn < n - 1 ? wn : n - 1;
    memcpy(buf, w, m);
    buf[m] = '\0';
}

void st_engine_log_lines(const char *log_path, const char *needle, char *out, size_t n)
{
    size_t at = strlen(out);
    FILE *f = fopen(log_path, "rb");
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *hit = strstr(line, needle);
        if (!hit) continue;
        hit[strcspn(hit, "\r\n")] = '\0';
        if (strlen(hit) > 300) hit[300] = '\0';
        const int w = snprintf(out + at, at < n ? n - at : 0, "%s%s", at ? " | " : "", hit);
        if (w < 0 || (size_t)w >= n - at) {
            out[at] = '\0';
            break;
        }
        at += (size_t)w;
    }
    fclose(f);
}

/* A port the kernel says is free now (bound to port 0, then released). */
static int free_port(void)
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Whether the child has ended (reaped here). */
static bool child_gone(st_engine *e)
{
    if (!e->pid) return true;
    int status;
    const pid_t r = waitpid(e->pid, &status, WNOHANG);
    if (r == e->pid || (r < 0 && errno == ECHILD)) {
        e->pid = 0;
        return true;
    }
    return false;
}

void st_engine_stop(st_engine *e)
{
    if (!e->pid) return;
    kill(-e->pid, SIGTERM); /* its own process group: whatever it started goes too */
    kill(e->pid, SIGTERM);
    const double t0 = now_s();
    while (!child_gone(e)) {
        if (now_s() - t0 > 5) {
            kill(-e->pid, SIGKILL);
            kill(e->pid, SIGKILL);
            waitpid(e->pid, NULL, 0);
            e->pid = 0;
            break;
        }
        sleep_ms(20);
    }
}

/* One HTTP exchange: METHOD PATH with BODY (may be NULL); *RESP (malloc'd)
 * is the response body, *CODE the status. -1 with errno-style reason in
 * WHY when the connection failed; -2 when stopped; -3 on timeout. */
static int http(st_engine *e, const char *method, const char *path, const char *body, double timeout_s,
                volatile int *stop, int *code, char **resp, char *why, size_t wn)
{
    *resp = NULL;
    *code = 0;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, wn, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)e->port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        snprintf(why, wn, "connect to 127.0.0.1:%d: %s", e->port, strerror(errno));
        close(fd);
        return -1;
    }
    const size_t bl = body ? strlen(body) : 0;
    char head[512];
    const int hn = snprintf(head, sizeof head,
                            "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\nContent-Type: "
                            "application/json\r\nContent-Length: %zu\r\n\r\n",
                            method, path, e->port, bl);
    const char *parts[2] = {head, body};
    const size_t lens[2] = {(size_t)hn, bl};
    for (int k = 0; k < 2; k++)
        for (size_t done = 0; done < lens[k];) {
            const ssize_t w = send(fd, parts[k] + done, lens[k] - done, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                snprintf(why, wn, "send: %s", strerror(errno));
                close(fd);
                return -1;
            }
            done += (size_t)w;
        }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        snprintf(why, wn, "out of memory");
        return -1;
    }
    const double t0 = now_s();
    for (;;) {
        if (stopped(stop)) {
            free(buf);
            close(fd);
            return -2;
        }
        if (now_s() - t0 > timeout_s) {
            free(buf);
            close(fd);
            snprintf(why, wn, "no answer within %.0f s", timeout_s);
            return -3;
        }
        struct pollfd p = {fd, POLLIN, 0};
        const int pr = poll(&p, 1, 200);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            if (child_gone(e)) break; /* it died mid-answer: what came is judged below */
            continue;
        }
        if (n + 4096 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                snprintf(why, wn, "out of memory");
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        const ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (n < 12 || strncmp(buf, "HTTP/1.", 7) != 0) {
        free(buf);
        snprintf(why, wn, "no HTTP answer (the connection closed)");
        return -1;
    }
    *code = atoi(buf + 9);
    char *b = strstr(buf, "\r\n\r\n");
    b = b ? b + 4 : buf + n;
    /* chunked transfer: join the chunks in place */
    char *te = strcasestr(buf, "\r\nTransfer-Encoding: chunked");
    if (te && te < b) {
        char *out = b, *p = b;
        for (;;) {
            char *end;
            const unsigned long len = strtoul(p, &end, 16);
            char *data = strstr(end, "\r\n");
            if (!len || !data || data + 2 + len > buf + n) break;
            memmove(out, data + 2, len);
            out += len;
            p = data + 2 + len + 2;
            if (p > buf + n) break;
        }
        *out = '\0';
    }
    *resp = strdup(b);
    free(buf);
    if (!*resp) {
        snprintf(why, wn, "out of memory");
        return -1;
    }
    return 0;
}

st_status st_engine_start(st_engine *e, const char *bin, const char *const *args, int n_args, const char *log_path,
                          double timeout_s, volatile int *stop)
{
    memset(e, 0, sizeof *e);
    snprintf(e->log, sizeof e->log, "%s", log_path);
    snprintf(e->bin, sizeof e->bin, "%s", bin);
    if (access(bin, X_OK) != 0)
        return st_fail(ST_ERR_NOT_FOUND, "engine %s: %s (--engine names the llama-server binary)", bin,
                       errno == ENOENT ? "not found" : "not executable");
    e->port = free_port();
    if (e->port <= 0) return st_fail(ST_ERR_IO, "engine: no free loopback port: %s", strerror(errno));
    char port[16];
    snprintf(port, sizeof port, "%d", e->port);
    const char **argv = calloc((size_t)n_args + 8, sizeof *argv);
    if (!argv) return st_fail(ST_ERR_NOMEM, "engine: out of memory");
    int k = 0;
    argv[k++] = bin;
    for (int i = 0; i < n_args; i++) argv[k++] = args[i];
    argv[k++] = "--host";
    argv[k++] = "127.0.0.1";
    argv[k++] = "--port";
    argv[k++] = port;
    argv[k] = NULL;
    /* the engine's environment: the tool's, plus llama.cpp's log threshold
     * at trace (LLAMA_ARG_LOG_VERBOSITY=4, unless the user set one): its
     * common log drops ggml's info lines below that, and ggml-strata says
     * there whether strata-tune decodes (st_engine_log_lines reads it into
     * the profile's identity). Made here: the child only calls execve. */
    size_t ne = 0;
    bool has_lv = false;
    for (char **v = environ; *v; v++, ne++) has_lv |= !strncmp(*v, "LLAMA_ARG_LOG_VERBOSITY=", 24);
    char **envp = calloc(ne + 2, sizeof *envp);
    if (!envp) {
        free(argv);
        return st_fail(ST_ERR_NOMEM, "engine: out of memory");
    }
    memcpy(envp, environ, ne * sizeof *envp);
    if (!has_lv) envp[ne++] = "LLAMA_ARG_LOG_VERBOSITY=4";
    envp[ne] = NULL;
    const int logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        free(argv);
        free(envp);
        return st_fail(ST_ERR_IO, "engine log %s: %s", log_path, strerror(errno));
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        close(logfd);
        free(argv);
        free(envp);
        return st_fail(ST_ERR_IO, "engine: cannot start %s: %s", bin, strerror(err));
    }
    if (pid == 0) {
        /* the child: its own process group, so a Ctrl-C reaches the tool
         * only and the tool ends the engine; and it dies with the tool */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(logfd, 1);
        dup2(logfd, 2);
        const int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        execve(bin, (char *const *)argv, envp);
        dprintf(2, "error: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides: no window where a signal finds it in ours */
    e->pid = pid;
    close(logfd);
    free(argv);
    free(envp);
    const double t0 = now_s();
    for (;;) {
        if (stopped(stop)) {
            st_engine_stop(e);
            return st_fail(ST_ERR_INTERRUPTED, "stopped while the engine was starting");
        }
        if (child_gone(e)) {
            char w[512];
            st_engine_last_words(log_path, w, sizeof w);
            return st_fail(ST_ERR_IO, "engine %s ended while starting: %s", bin, w[0] ? w : "(it printed nothing)");
        }
        if (now_s() - t0 > timeout_s) {
            char w[512];
            st_engine_last_words(log_path, w, sizeof w);
            st_engine_stop(e);
            return st_fail(ST_ERR_IO, "engine %s did not answer /health within %.0f s; its last line: %s", bin,
                           timeout_s, w[0] ? w : "(none)");
        }
        int code;
        char *resp = NULL, why[256];
        const int r = http(e, "GET", "/health", NULL, 5, stop, &code, &resp, why, sizeof why);
        free(resp);
        if (r == 0 && code == 200) return ST_OK;
        sleep_ms(r == 0 ? 100 : 50);
    }
}

/* S as a JSON string literal (cJSON escapes it). */
static char *json_request(const char *prompt, int n_predict)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "prompt", prompt);
    cJSON_AddNumberToObject(j, "n_predict", n_predict);
    cJSON_AddNumberToObject(j, "temperature", 0);
    cJSON_AddNumberToObject(j, "top_k", 1);
    cJSON_AddNumberToObject(j, "seed", 42);
    cJSON_AddBoolToObject(j, "ignore_eos", 1);
    cJSON_AddBoolToObject(j, "return_tokens", 1);
    cJSON_AddBoolToObject(j, "cache_prompt", 0);
    cJSON_AddBoolToObject(j, "stream", 0);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static double jnum(const cJSON *o, const char *k, double d)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : d;
}

st_status st_engine_complete(st_engine *e, const char *prompt, int n_predict, double timeout_s, volatile int *stop,
                             st_engine_reply *r)
{
    r->n_tokens = 0;
    r->decode_ms = 0;
    r->n_decoded = 0;
    r->draft_n = r->draft_accepted = 0;
    char *body = json_request(prompt, n_predict);
    if (!body) return st_fail(ST_ERR_NOMEM, "engine request: out of memory");
    int code;
    char *resp = NULL, why[256];
    const int h = http(e, "POST", "/completion", body, timeout_s, stop, &code, &resp, why, sizeof why);
    free(body);
    if (h == -2) return st_fail(ST_ERR_INTERRUPTED, "stopped during a completion");
    if (h != 0 || code != 200) {
        char w[512] = "";
        if (child_gone(e)) st_engine_last_words(e->log, w, sizeof w);
        char msg[300] = "";
        if (h == 0) {
            cJSON *j = cJSON_Parse(resp);
            const cJSON *err = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
            const cJSON *m = err ? cJSON_GetObjectItemCaseSensitive(err, "message") : NULL;
            snprintf(msg, sizeof msg, "HTTP %d%s%s", code, cJSON_IsString(m) ? ": " : "",
                     cJSON_IsString(m) ? m->valuestring : "");
            cJSON_Delete(j);
        }
        free(resp);
        return st_fail(ST_ERR_IO, "engine %s: a completion failed (%s)%s%s", e->bin, h == 0 ? msg : why,
                       w[0] ? "; its last line: " : "", w);
    }
    cJSON *j = cJSON_Parse(resp);
    free(resp);
    const cJSON *toks = j ? cJSON_GetObjectItemCaseSensitive(j, "tokens") : NULL;
    const cJSON *tm = j ? cJSON_GetObjectItemCaseSensitive(j, "timings") : NULL;
    if (!cJSON_IsArray(toks) || !cJSON_IsObject(tm)) {
        cJSON_Delete(j);
        return st_fail(ST_ERR_PARSE, "engine %s: the completion has no \"tokens\" or \"timings\" (is it llama-server?)",
                       e->bin);
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, toks)
    {
        if (!cJSON_IsNumber(t)) continue;
        if (r->n_tokens < r->cap) r->tokens[r->n_tokens] = (int)t->valuedouble;
        r->n_tokens++;
    }
    if (r->n_tokens > r->cap) r->n_tokens = r->cap;
    r->decode_ms = jnum(tm, "predicted_ms", 0);
    r->n_decoded = (int)jnum(tm, "predicted_n", 0);
    r->draft_n = (long)jnum(tm, "draft_n", 0);
    r->draft_accepted = (long)jnum(tm, "draft_n_accepted", 0);
    cJSON_Delete(j);
    if (!(r->decode_ms > 0) || r->n_decoded <= 0)
        return st_fail(ST_ERR_PARSE, "engine %s: the completion's timings name no decode time", e->bin);
    return ST_OK;
}

/* sha256 of the file at DIR/NAME into the running hash (its hex). */
static st_status hash_into(st_sha256 *all, const char *path)
{
    char hex[ST_SHA256_HEX];
    ST_TRY(st_sha256_file(path, hex));
    st_sha256_update(all, hex, 64);
    return ST_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

st_status st_engine_identity(const char *bin, char *version, size_t vn, char sha[65])
{
    version[0] = '\0';
    if (access(bin, X_OK) != 0)
        return st_fail(ST_ERR_NOT_FOUND, "engine %s: %s (--engine names the llama-server binary)", bin,
                       errno == ENOENT ? "not found" : "not executable");
    /* `BIN --version`: its lines "version: N (commit)" and "built with ..." */
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return st_fail(ST_ERR_IO, "engine: pipe: %s", strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return st_fail(ST_ERR_IO, "engine: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execl(bin, bin, "--version", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char out[8192];
    size_t n = 0;
    const double t0 = now_s();
    for (;;) {
        struct pollfd p = {fds[0], POLLIN, 0};
        const int pr = poll(&p, 1, 200);
        if (pr < 0 && errno == EINTR) continue;
        if (now_s() - t0 > 60) break;
        if (pr == 0) continue;
        const ssize_t r = read(fds[0], out + n, sizeof out - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (n >= sizeof out - 1) break;
    }
    close(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    out[n] = '\0';
    size_t vlen = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        size_t ln = strlen(line);
        while (ln && line[ln - 1] == '\r') line[--ln] = '\0';
        if (strncmp(line, "version:", 8) && strncmp(line, "built with", 10)) continue;
        const int w = snprintf(version + vlen, vn - vlen, "%s%s", vlen ? "; " : "", line);
        if (w < 0 || (size_t)w >= vn - vlen) break;
        vlen += (size_t)w;
    }
    if (!vlen) snprintf(version, vn, "unknown (--version printed no version line)");
    /* the binary and the shared libraries of its build folder: a rebuilt
     * libggml changes the arithmetic without changing llama-server */
    st_sha256 all;
    st_sha256_init(&all);
    ST_TRY(hash_into(&all, bin));
    char dir[4096];
    if (strlen(bin) >= sizeof dir) /* refused, never cut: a cut path hashes another folder */
        return st_fail(ST_ERR_INVALID_ARG, "settings: the engine's path has %zu bytes, more than %zu: name a shorter one",
                       strlen(bin), sizeof dir - 1);
    snprintf(dir, sizeof dir, "%s", bin);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (d) {
        char *names[256];
        int nn = 0;
        struct dirent *de;
        while ((de = readdir(d)) && nn < 256)
            if (!strncmp(de->d_name, "lib", 3) && strstr(de->d_name, ".so")) names[nn++] = strdup(de->d_name);
        closedir(d);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        st_status s = ST_OK;
        for (int i = 0; i < nn; i++) {
            char p[8192];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s", dir, names[i] ? names[i] : "");
            if (s == ST_OK && names[i] && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                st_sha256_update(&all, names[i], strlen(names[i]));
                s = hash_into(&all, p);
            }
            free(names[i]);
        }
        ST_TRY(s);
    }
    st_sha256_hex(&all, sha);
    return ST_OK;
}
