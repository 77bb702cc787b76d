// Where a config key the user set came from, as the CLI records it (cli/config_cli.h
// ConfigCli::given: "section.key" -> kGivenOnCommandLine, or the path of the config file
// that set it). Jobs use it to refuse a typed value that contradicts a record and to let a
// config file's value yield to it (docs/config.md "[tokenizer] and checkpoints").
#pragma once

namespace tupe {

/// The `given` text of a key set on the command line.
inline constexpr char kGivenOnCommandLine[] = "the command line";

}  // namespace tupe
