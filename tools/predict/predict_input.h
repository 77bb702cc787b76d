// Input lines of `tupe predict`: one text per line (UTF-8, LF or CRLF, the last line with or
// without its end), from a file or stdin, encoded as [CLS] text [SEP] with the model's
// tokenizer. The literal text "[MASK]" (case-sensitive, as in transformers) is the [MASK]
// token: a line is cut at each "[MASK]" and the pieces between are tokenised one by one,
// which is what transformers does with a special token written in the text. Every line is
// checked before anything runs; a bad line is one error "<file>:<line>: <cause>".
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "data_pipeline/tokenizer.h"

namespace tupe::predict {

/// The literal that stands for the [MASK] token in an input line.
inline constexpr const char* kMaskText = "[MASK]";

/// One encoded input line.
struct InputLine {
  int64_t line = 0;                 ///< 1-based line number in the input
  std::string text;                 ///< the line as read (line end removed)
  std::vector<int32_t> ids;         ///< [CLS] ... [SEP]
  std::vector<int64_t> mask_positions;  ///< indices into ids of the [MASK] tokens, in order
};

/// What the checks need to know.
struct InputRules {
  std::string source;           ///< the file name for messages ("<stdin>" for stdin)
  int64_t max_positions = 512;  ///< the model's longest sequence (tokens incl. [CLS]/[SEP])
  bool need_mask = false;       ///< fill-mask: every line holds at least one [MASK]
};

/// Reads every line of `in` and encodes it. Throws tupe::Error "<source>:<line>: <cause>"
/// for the first bad line: blank, invalid UTF-8, no [MASK] (need_mask), or more than
/// max_positions tokens with [CLS] and [SEP]; "<source>: no input lines" when empty.
std::vector<InputLine> read_input_lines(std::istream& in, const data_pipeline::Tokenizer& tokenizer,
                                        const InputRules& rules);

/// The ids of one line's text (without [CLS]/[SEP]): the pieces between "[MASK]"s tokenised
/// separately, [MASK] ids in between; `mask_offsets` receives the [MASK] indices into the
/// returned ids. Throws tupe::Error from the tokenizer on invalid UTF-8.
std::vector<int32_t> encode_with_masks(const data_pipeline::Tokenizer& tokenizer, const std::string& text,
                                       std::vector<int64_t>* mask_offsets);

}  // namespace tupe::predict
