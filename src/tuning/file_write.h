/* The write rule's steps, for the tuner's install of a table together with
 * its report (tune_journal.c) and the tests; st_file_write_atomic and
 * st_table_write_atomic (strata/tools/output.h) are the two steps in one.
 * Internal to the tools library. */
#ifndef ST_FILE_WRITE_H
#define ST_FILE_WRITE_H

#include "strata/tools/output.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The file rule (one home: this file). Every file a tool writes or removes
 * is one plain entry of the folder it was given: st_out_name_ok says
 * whether NAME is one (not empty, not "." or "..", no '/', no control
 * byte, shorter than 256 bytes). A file is only ever written by a
 * temporary file beside it renamed over it, and the rename goes over a
 * regular file only (st_out_target_check): never over a folder, a FIFO, a
 * device, a socket or a symbolic link (neither followed nor replaced: a
 * tune's roll back keeps the old file by a hard link, which a link would
 * make a second link of), and never over the file the output is made from
 * (st_out_not_input). */
bool st_out_name_ok(const char *name);

/* What a file of mode M is, for a line ("a folder", "a FIFO", "a device",
 * "a socket", "a symbolic link"; "not a regular file" otherwise). */
const char *st_out_kind(mode_t m);

/* ST_OK when nothing or a regular file stands at PATH; else ST_ERR_EXISTS with one line naming PATH and
 * what stands there ("is a FIFO: not replaced"). */
st_status st_out_target_check(const char *path);

/* ST_ERR_INVALID_ARG with one line when OUT and INPUT name the same file
 * (one inode, whatever the spelling). */
st_status st_out_not_input(const char *out, const char *input);

/* "<prefix><tag><pid>[.<n>]" (COUNTER: the ".<n>" is there): the pid
 * after the last TAG in NAME, or -1 when NAME is not of that form. How
 * the temporary files, links and probes of a run carry its pid. */
long st_out_name_pid(const char *name, const char *tag, bool counter);

/* Whether the files carrying PID (> 0) are a dead process's: one that is
 * gone (not alive, not one we may not signal). OWN_IS_DEAD: this process's
 * own pid counts as dead too (a settling under the folder's lock, before
 * this run made any file: the name is an earlier process's that had the
 * same pid, as pids repeat from run to run in a container); else never
 * (this process may be writing it now). */
bool st_pid_dead(long pid, bool own_is_dead);

/* The folder part of PATH (malloc'd; "." for a bare name, "/" at the
 * root), NULL when out of memory. */
char *st_path_dir(const char *path);

/* The name part of PATH (within PATH: after its last '/'). */
const char *st_path_base(const char *path);

/* For a file the user names (`report -o`, the --html pages and their
 * JSON): ST_ERR_INVALID_ARG with one line when its name is one a tables
 * folder keeps for the tuner (its lock, its journal, tables.json, a
 * *.table, a *.table.candidate, a *.manifest), which a page written over
 * would break or which a running tune would remove. */
st_status st_out_not_tool_file(const char *path);

/* The output folder DIR of a run (WHO starts the line: "tune",
 * "settings"), before the run: made when missing (one level, mode 0777
 * less the umask), then checked to be a folder. ST_ERR_IO with one line
 * ("WHO: cannot create the output folder DIR: ...", "... is a file, not a
 * folder") otherwise. */
st_status st_out_dir_make(const char *dir, const char *who);

/* The probe of the output folder DIR, before a long run: BYTES (of a
 * pseudo-random stream, which no file system compresses) written to
 * DIR/ST_TUNE_PROBE_PREFIX<pid>, synced and removed, so a folder that is
 * read-only, not writable for this process or too full for the outputs
 * says so now in one line (ST_ERR_IO, "WHO: cannot write the outputs in
 * DIR (a probe of N bytes, PATH): <reason>"), not after the run; and a
 * hard link of it made and removed (PATH.1: an install keeps the old
 * files by hard links for its roll back), else one line saying so. The
 * probe is tracked (tmpfiles.h) while it exists; one a killed run left is
 * litter the next run of the folder removes (tune_out.h). */
#define ST_TUNE_PROBE_PREFIX ".strata-tune-probe."
st_status st_out_probe(const char *dir, const char *who, size_t bytes);

/* BYTES rounded up to whole blocks of DIR's file system (its fragment
 * size, statvfs; 4096 when it cannot be read): what a file of BYTES
 * takes there. */
size_t st_out_blocks(const char *dir, size_t bytes);

/* Test hook: every step of the file rule that changes the folder (a
 * temporary file created or synced, a rename, a link, a removal, a
 * journal's steps in tune_journal.c, the lock taken, the probe written
 * and removed) and every point where a tune looks at its stop flag (each
 * shape of the sweep, each token count of the gate) calls st_file_step();
 * when st_file_kill_at_step is N >= 1 the Nth step raises
 * st_file_kill_signal (SIGKILL unless a test sets another) first, so a
 * test stops the process with any signal at every instant of a tune
 * without timing. -1 (the default) disables it; st_file_steps counts the
 * steps taken. */
extern long st_file_kill_at_step;
extern int st_file_kill_signal;
/* Test hook: when set, st_file_commit fails (EIO, as a rename would) for
 * a target whose path ends in it, exercising a roll back. NULL (the
 * default) in production. */
extern const char *st_file_fail_rename_of;
extern long st_file_steps;
/* Test hook: the value of st_file_steps when an install wrote its journal
 * (its commit point: a stop before it installs nothing, one after it
 * lets the install complete); -1 until one did. */
extern long st_file_commit_step;
void st_file_step(void);

/* Writes LEN bytes of TEXT to a new temporary file beside PATH
 * ("PATH.tmp.<pid>.<n>", created with O_EXCL and tracked in tmpfiles.h),
 * fsyncs and closes it; *TMP (malloc'd, the caller frees) names it and
 * *SLOT is its tmpfiles slot. PATH must pass st_out_target_check. On
 * failure nothing is left behind, *TMP is
 * NULL and the message names PATH, the step, the temporary file and the
 * system's reason. */
st_status st_file_write_temp(const char *path, const char *text, size_t len, char **tmp, int *slot);

/* Renames TMP (from st_file_write_temp) over PATH and fsyncs the folder,
 * so PATH holds either its old bytes or all the new ones; the slot is
 * untracked. When the rename fails TMP is removed and PATH is untouched.
 * *RENAMED (may be NULL) says whether PATH holds the new bytes, which it
 * does when only the folder's sync failed (an error too). */
st_status st_file_commit(const char *path, const char *tmp, int slot, bool *renamed);

/* Writes N files as one set: every text to its temporary file first (a
 * full disk or a refused target stops here, before any PATH changes), then
 * each renamed over its path in order, so a reader that trusts the last
 * file finds the others in place. A temporary file not renamed in is
 * removed. For files the user names, in a folder no lock guards (a
 * report's page and its JSON: `report -o`, the --html pages); the sets a
 * locked tables folder holds (a tune's, a settings run's) go in through
 * the journal instead (tune_out.h: st_tune_out_install, st_out_install_set),
 * so a kill at any instant leaves one whole set. */
#define ST_FILE_SET_MAX 8
st_status st_file_write_set(int n, const char *const *paths, const char *const *texts, const size_t *lens);

/* Test hook: when set, st_file_commit calls it with the temporary file's
 * name just before the rename (a test kills the process there). NULL (the
 * default) in production. */
extern void (*st_file_write_before_rename)(const char *tmp);

/* Test hook: when >= 0, st_file_write_temp (so every atomic write) fails
 * with EIO after this many bytes, exercising the cleanup path. -1 (the
 * default) disables it. */
extern long st_table_write_fail_after_bytes;

#endif
