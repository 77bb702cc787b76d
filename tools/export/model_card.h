// README.md of an exported folder: a Hugging Face model card, generated from the facts the
// checkpoint records (tools/export/card_facts.h), never typed by hand.
//   ---                                  the Hub's YAML metadata block
//   library_name: transformers           (tupe for --format tupe)
//   pipeline_tag: fill-mask              (text-classification for a fine-tuned model)
//   language: [en]
//   license: other                       (tupe records no license)
//   tags: [tupe, bert, fill-mask, tupe-r, ...]
//   model-index: ...                     the validation loss (pre-training) or the GLUE dev
//                                        metrics of results.json (fine-tuned), as numbers
//   ---
//   # <name>: what the model is (variant, sizes, parameters, vocabulary), how it was
//   pre-trained (steps, sequences and tokens seen, global batch, losses, corpus), the GLUE
//   results, how to load it (AutoModel... with trust_remote_code=True for tupe's modeling
//   code; the fill-mask or text-classification pipeline).
// Paths: a relative one as given, an absolute one by its last two components (the run and the
// file), so that a card published to the Hub carries no machine's folder layout.
// Strings in the YAML are JSON-quoted (a JSON string is a YAML double-quoted scalar), and
// every real number carries a '.' or an exponent that YAML 1.1 readers (PyYAML) take as a float.
#pragma once
#include <string>

#include "tools/export/card_facts.h"

namespace tupe::exporting {

/// How the folder was written, as the card shows it.
struct CardExport {
  std::string format;        ///< "hf-bert" | "hf-tupe" | "tupe"
  std::string architecture;  ///< e.g. "TupeForMaskedLM" ("" for tupe)
  std::string name;          ///< the model's name: the output folder's name
  std::string path;          ///< the output folder as given; the loading example shows it when
                             ///< relative, and by its name (run from the parent) when absolute
  bool tokenizer = false;    ///< tokenizer files written
};

/// The README.md text (UTF-8, ends in a newline).
std::string model_card_markdown(const CardFacts& facts, const CardExport& how);

/// A double as YAML reads it back exactly: the shortest round-trip text, with ".0" put
/// before an exponent or at the end when it has no '.' ("1.0e-05", "3.0"); "null" for inf/NaN.
std::string yaml_number(double value);

}  // namespace tupe::exporting
