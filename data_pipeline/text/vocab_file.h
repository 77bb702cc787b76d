// What a vocabulary file holds, read from its bytes, never from its name: a WordPiece
// vocab.txt is UTF-8 text with one token a line; a SentencePiece .model is a serialised
// protobuf (sentencepiece_model.proto's ModelProto: binary, with NUL bytes and float scores);
// the .vocab listing that SentencePiece (and `tupe vocab`) writes beside a model is text of
// "<piece>\t<score>" lines, which no tokenizer loads.
#pragma once
#include <string>

namespace tupe::data_pipeline {

/// The content of a vocabulary file (sniff_vocab_file).
enum class VocabFileContent {
  kText,                  ///< UTF-8 text, no NUL or control bytes but \t \r \n: a WordPiece vocab.txt
  kSentencePieceModel,    ///< loads as a SentencePiece ModelProto
  kSentencePieceListing,  ///< text whose first line is "<piece>\t<number>": a SentencePiece .vocab listing
  kOther,                 ///< neither (e.g. binary that is no SentencePiece model, or text with invalid UTF-8)
};

/// Reads `path` whole and says what it holds. Throws tupe::Error "<path>: cannot open: <reason>"
/// or "<path>: cannot read: <reason>".
VocabFileContent sniff_vocab_file(const std::string& path);

/// The bytes of a vocabulary file, whole. Throws tupe::Error "<path>: cannot open: <reason>"
/// or "<path>: cannot read: <reason>". (WordPiece's loader and sniff_vocab_file read through it.)
std::string read_vocab_bytes(const std::string& path);

/// "<stem>.model" for "<stem>.vocab" (the model a listing was written with), else "".
std::string model_beside_listing(const std::string& listing_path);

}  // namespace tupe::data_pipeline
