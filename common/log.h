// The console log of a tupe process, through spdlog (common/log.cpp; spdlog and fmt stay
// out of this header, so no LibTorch translation unit sees their fmt next to LibTorch's).
//
// Who prints what, and where:
//   debug  stdout, every rank, "[rank R] debug: <text>" (shown at --log-level debug only)
//   info   stdout, rank 0 only, "<text>"; with --log-ranks all every rank prints its own,
//          tagged "[rank R] <text>" (a single process never carries the tag)
//   warn   stderr, any rank,   "tupe: rank R: warning: <text>" ("tupe: warning: ..." alone)
//   error  stderr, once,       "tupe <command>: [rank R: ]error: <text>" (cli/rank_guard.h
//          and main() print the error that ends a job; nothing else does)
// Every record is flushed when written, so a log redirected to a file under mpirun or
// SLURM is complete up to the last line even after a crash. Records are whole lines: the
// rank 0 progress line (trainer/pretrain/metrics.h) is the one thing that rewrites a line, and
// only on a real terminal.
//
// The level comes from --log-level (every subcommand; cli/config_cli.h), else the
// environment variable TUPE_LOG_LEVEL, else info. --log-ranks / TUPE_LOG_RANKS likewise.
#pragma once
#include <iosfwd>
#include <string>
#include <string_view>

namespace tupe::log {

/// Severity, lowest first. kOff silences everything but the job-ending error.
enum class Level { kDebug, kInfo, kWarn, kError, kOff };

/// "debug" | "info" | "warn" | "error" | "off" -> Level. Throws tupe::Error
/// "<where>: unknown log level 'x' (debug, info, warn, error, off)".
Level parse_level(std::string_view text, std::string_view where);
const char* to_string(Level level);

/// Which ranks print info records.
enum class Ranks { kRankZero, kAll };
/// "0" | "all" -> Ranks. Throws tupe::Error "<where>: unknown log ranks 'x' (0, all)".
Ranks parse_ranks(std::string_view text, std::string_view where);

/// Process-wide settings. Until set_* is called: rank 0 of 1, level info, rank 0 only
/// (cli/config_cli.cpp applies --log-level / TUPE_LOG_LEVEL and --log-ranks / TUPE_LOG_RANKS).
void set_level(Level level);
void set_ranks(Ranks ranks);
/// Called once MPI knows the process's place (dist::MpiEnv does it).
void set_rank(int rank, int world_size);
bool enabled(Level level);  ///< whether a record of `level` would print on this rank

/// Whether an MPI or SLURM launcher started this process (OMPI_COMM_WORLD_SIZE, PMIX_RANK,
/// PMI_RANK or SLURM_PROCID set): a launcher's pseudo-terminal usually ends in a log file.
/// main() records it before MPI_Init, because Open MPI's singleton init (a plain `tupe
/// pretrain`) sets PMIX_RANK itself; unrecorded, the environment is read now.
void record_launcher_at_start();
bool started_by_launcher();

/// Sends debug and info records to stderr too (a command whose stdout carries data, such
/// as `tupe predict --output -`).
void send_info_to_stderr(bool on);

/// Sends stdout records to `out` and stderr records to `err` instead (tests); nullptr
/// restores the process streams.
void redirect_for_test(std::ostream* out, std::ostream* err);

void debug(std::string_view text);
void info(std::string_view text);
void warn(std::string_view text);
/// The job-ending error, "tupe <command>: [rank R: ]error: <text>" (`kind` "error" or
/// "internal error"); printed whatever the level.
void error(std::string_view command, std::string_view kind, std::string_view text, bool tag_rank);
/// A whole line to stderr, whatever the level (the last words of dist::MpiEnv::abort).
void fatal(std::string_view line);

}  // namespace tupe::log
