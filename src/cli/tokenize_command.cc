#include "cli/tokenize_command.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace myriad::cli {

TokenizeCommand::TokenizeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("tokenize", "Token ids of a text under a Hugging Face tokenizer.json");
  cmd_->add_option("--tokenizer", tokenizer_path_,
                   "tokenizer.json, or a folder with tokenizer.json (and tokenizer_config.json)")
      ->required();
  cmd_->add_option("text", text_, "Text to encode (default: standard input)");
  cmd_->add_flag("--no-special", no_special_, "Do not add the special tokens of the post-processor (BOS)");
  cmd_->add_flag("--describe", describe_, "Print the tokenizer's pipeline and load time to stderr");
  cmd_->add_option("--format", format_, "ids (space-separated), json, or tokens (one per line)")
      ->check(CLI::IsMember({"ids", "json", "tokens"}))
      ->capture_default_str();
}

int TokenizeCommand::Run() {
  const auto start = std::chrono::steady_clock::now();
  auto tok = tokenizer::Tokenizer::FromFile(tokenizer_path_);
  if (!tok.ok()) {
    fmt::print(stderr, "myriad tokenize: {}\n", std::string(tok.status().message()));
    return 2;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (describe_) fmt::print(stderr, "{}\nloaded in {:.0f} ms\n", (*tok)->Describe(), load_ms);
  if (cmd_->count("text") == 0) {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text_ = in.str();
  }
  const std::vector<uint32_t> ids = (*tok)->Encode(text_, !no_special_);
  if (format_ == "json") {
    fmt::print("{}\n", nlohmann::json(ids).dump());
  } else if (format_ == "tokens") {
    for (uint32_t id : ids) fmt::print("{}\t{}\n", id, (*tok)->IdToToken(id).value_or("?"));
  } else {
    std::string line;
    for (uint32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
    fmt::print("{}\n", line);
  }
  return 0;
}

}  // namespace myriad::cli
