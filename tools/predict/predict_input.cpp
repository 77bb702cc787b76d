#include "tools/predict/predict_input.h"

#include <cstring>

#include "common/error.h"

namespace tupe::predict {

std::vector<int32_t> encode_with_masks(const data_pipeline::Tokenizer& tokenizer, const std::string& text,
                                       std::vector<int64_t>* mask_offsets) {
  const int32_t mask_id = tokenizer.special_tokens().mask;
  const size_t mask_len = std::strlen(kMaskText);
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (true) {
    const size_t at = text.find(kMaskText, begin);
    const std::string_view piece(text.data() + begin, (at == std::string::npos ? text.size() : at) - begin);
    if (!piece.empty()) {
      const std::vector<int32_t> part = tokenizer.encode(piece);
      ids.insert(ids.end(), part.begin(), part.end());
    }
    if (at == std::string::npos) break;
    if (mask_offsets) mask_offsets->push_back(static_cast<int64_t>(ids.size()));
    ids.push_back(mask_id);
    begin = at + mask_len;
  }
  return ids;
}

std::vector<InputLine> read_input_lines(std::istream& in, const data_pipeline::Tokenizer& tokenizer,
                                        const InputRules& rules) {
  const data_pipeline::SpecialTokens special = tokenizer.special_tokens();
  std::vector<InputLine> out;
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (number == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte-order mark
    const std::string where = rules.source + ":" + std::to_string(number);
    TUPE_CHECK(text.find_first_not_of(" \t\f\v") != std::string::npos,
               where << ": blank line (one text per line; remove empty lines)");
    InputLine line;
    line.line = number;
    std::vector<int64_t> offsets;
    std::vector<int32_t> body;
    try {
      body = encode_with_masks(tokenizer, text, &offsets);
    } catch (const Error& e) {
      TUPE_FAIL(where << ": " << e.what());
    }
    TUPE_CHECK(!rules.need_mask || !offsets.empty(),
               where << ": no " << kMaskText << " in the line (fill-mask predicts the tokens at [MASK]; write it literally, "
                                                "upper case)");
    const int64_t length = static_cast<int64_t>(body.size()) + 2;
    TUPE_CHECK(length <= rules.max_positions,
               where << ": " << length << " tokens with [CLS] and [SEP], more than the model's max_positions "
                     << rules.max_positions << " (shorten or split the line)");
    line.ids.reserve(static_cast<size_t>(length));
    line.ids.push_back(special.cls);
    line.ids.insert(line.ids.end(), body.begin(), body.end());
    line.ids.push_back(special.sep);
    for (const int64_t o : offsets) line.mask_positions.push_back(o + 1);
    line.text = std::move(text);
    out.push_back(std::move(line));
  }
  TUPE_CHECK(!in.bad(), rules.source << ": read error after line " << number);
  TUPE_CHECK(!out.empty(), rules.source << ": no input lines");
  return out;
}

}  // namespace tupe::predict
