#pragma once
// `myriad tokenize --tokenizer PATH [--no-special] [--format ids|json|tokens] [TEXT]`: prints
// the token ids a Hugging Face tokenizer.json (or a folder holding one) gives TEXT (or stdin),
// as the engines would see them. Input errors exit with 2.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class TokenizeCommand {
 public:
  explicit TokenizeCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string tokenizer_path_;
  std::string text_;
  bool no_special_ = false;
  bool describe_ = false;
  std::string format_ = "ids";
};

}  // namespace myriad::cli
