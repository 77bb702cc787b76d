// How every MPI subcommand (preprocess, pretrain, finetune, evaluate) ends when a rank fails.
#pragma once
#include <functional>
#include <string>

namespace tupe::dist {
class MpiEnv;
}

namespace tupe::cli {

/// Runs one subcommand's job on this rank; `body` returns the exit code.
/// One rank: exceptions propagate to main(), which prints them as one line.
/// Under mpirun (world size > 1): any rank's exception ends every rank within about a
/// second. The failing rank prints "tupe <command>: rank R: error: <message>" as one line
/// and calls MPI_Abort (dist::MpiEnv::abort), which makes the launcher stop the other ranks,
/// wherever they wait (SIGTERM gets its default action back first). Ranks other than 0 wait
/// 2 s before printing: when rank 0 fails too
/// (an error every rank meets, such as a bad config value), rank 0's line is printed and
/// the job ends before the others repeat it. A tupe::AgreedError (raised by every rank
/// together) is printed by rank 0 as "tupe <command>: error: <message>" and every rank
/// returns 1 without aborting. Exit codes: 1 for tupe::Error, 3 otherwise.
int run_job_on_ranks(const dist::MpiEnv& env, const std::string& command, const std::function<int()>& body);

/// `text` as one printable line (errors are printed so): a line break (LF or CRLF) becomes a
/// space, any other control character its escape (a stray carriage return "\\r", a tab
/// "\\t", others "\\xNN"), so a CR from a CRLF file cannot rewrite the terminal line.
std::string one_line(const std::string& text);

}  // namespace tupe::cli
