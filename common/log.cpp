#include "common/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "common/config_fields.h"
#include "common/error.h"

namespace tupe::log {

namespace {

// The one process-wide piece of state in tupe: a console belongs to the process, as
// spdlog's own registry does. Everything else is passed in a context object.
struct Console {
  std::mutex mutex;  // guards the loggers while they are swapped (tests) or built
  std::shared_ptr<spdlog::logger> out, err;
  std::atomic<int> rank{0}, world_size{1};
  std::atomic<Level> level{Level::kInfo};
  std::atomic<Ranks> ranks{Ranks::kRankZero};
  std::atomic<bool> info_to_err{false};
  std::atomic<int> launcher{-1};  // -1: not recorded at start

  Console() { use(nullptr, nullptr); }

  /// Plain sinks ("%v": tupe writes its own prefixes), every record flushed.
  void use(std::ostream* o, std::ostream* e) {
    spdlog::sink_ptr so, se;
    if (o)
      so = std::make_shared<spdlog::sinks::ostream_sink_mt>(*o, true);
    else
      so = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    if (e)
      se = std::make_shared<spdlog::sinks::ostream_sink_mt>(*e, true);
    else
      se = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto make = [](const char* name, spdlog::sink_ptr sink) {
      auto l = std::make_shared<spdlog::logger>(name, std::move(sink));
      l->set_pattern("%v");
      l->set_level(spdlog::level::trace);  // tupe filters by its own level and rank rules
      l->flush_on(spdlog::level::trace);
      return l;
    };
    std::lock_guard<std::mutex> g(mutex);
    out = make("tupe.out", std::move(so));
    err = make("tupe.err", std::move(se));
  }

  void write(bool to_err, spdlog::level::level_enum lvl, const std::string& line) {
    std::shared_ptr<spdlog::logger> l;
    {
      std::lock_guard<std::mutex> g(mutex);
      l = to_err || info_to_err.load() ? err : out;
    }
    l->log(lvl, "{}", line);
  }
};

Console& console() {
  static Console c;
  return c;
}

std::string rank_tag(const Console& c) { return "[rank " + std::to_string(c.rank.load()) + "] "; }

}  // namespace

namespace {
// The words of the levels and of the rank selection (config_fields.h's Choice tables; a
// value's first word is the one printed).
constexpr Choice<Level> kLevelWords[] = {{"debug", Level::kDebug}, {"info", Level::kInfo}, {"warn", Level::kWarn},
                                         {"warning", Level::kWarn}, {"error", Level::kError}, {"off", Level::kOff}};
constexpr Choice<Ranks> kRanksWords[] = {{"0", Ranks::kRankZero}, {"all", Ranks::kAll}};
}  // namespace

Level parse_level(std::string_view text, std::string_view where) {
  for (const auto& c : kLevelWords)
    if (text == c.word) return c.value;
  std::string words;
  for (const auto& w : primary_words(kLevelWords)) words += (words.empty() ? "" : ", ") + w;
  TUPE_FAIL(where << ": unknown log level '" << text << "' (" << words << ")");
}

const char* to_string(Level level) {
  for (const auto& c : kLevelWords)
    if (c.value == level) return c.word;
  return "?";
}

Ranks parse_ranks(std::string_view text, std::string_view where) {
  for (const auto& c : kRanksWords)
    if (text == c.word) return c.value;
  TUPE_FAIL(where << ": unknown log ranks '" << text << "' (0 = rank 0 only, all = every rank)");
}

void set_level(Level level) { console().level = level; }
void set_ranks(Ranks ranks) { console().ranks = ranks; }
void set_rank(int rank, int world_size) {
  console().rank = rank;
  console().world_size = world_size;
}

bool enabled(Level lvl) {
  const Console& c = console();
  if (lvl < c.level.load()) return false;
  if (lvl == Level::kInfo) return c.rank.load() == 0 || c.ranks.load() == Ranks::kAll;
  return true;
}

namespace {
bool launcher_in_environment() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}
}  // namespace

void record_launcher_at_start() { console().launcher = launcher_in_environment() ? 1 : 0; }

bool started_by_launcher() {
  const int recorded = console().launcher.load();
  return recorded < 0 ? launcher_in_environment() : recorded == 1;
}

void send_info_to_stderr(bool on) { console().info_to_err = on; }

void redirect_for_test(std::ostream* out, std::ostream* err) { console().use(out, err); }

void debug(std::string_view text) {
  if (!enabled(Level::kDebug)) return;
  Console& c = console();
  c.write(false, spdlog::level::debug, rank_tag(c) + "debug: " + std::string(text));
}

void info(std::string_view text) {
  if (!enabled(Level::kInfo)) return;
  Console& c = console();
  const bool tag = c.world_size.load() > 1 && c.ranks.load() == Ranks::kAll;
  c.write(false, spdlog::level::info, (tag ? rank_tag(c) : std::string()) + std::string(text));
}

void warn(std::string_view text) {
  if (!enabled(Level::kWarn)) return;
  Console& c = console();
  const std::string who = c.world_size.load() > 1 ? "tupe: rank " + std::to_string(c.rank.load()) + ": " : "tupe: ";
  c.write(true, spdlog::level::warn, who + "warning: " + std::string(text));
}

void error(std::string_view command, std::string_view kind, std::string_view text, bool tag_rank) {
  Console& c = console();
  std::string line("tupe");
  if (!command.empty()) line.append(" ").append(command);
  line.append(": ");
  if (tag_rank) line.append("rank ").append(std::to_string(c.rank.load())).append(": ");
  line.append(kind).append(": ").append(text);
  c.write(true, spdlog::level::err, line);
}

void fatal(std::string_view line) { console().write(true, spdlog::level::critical, std::string(line)); }

}  // namespace tupe::log
