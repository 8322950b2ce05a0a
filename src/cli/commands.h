// The ringlm subcommands. Each takes the arguments after its name and returns the exit code.
#pragma once

namespace ringlm::cli {

int run_generate(int argc, char** argv);
int run_inspect(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_random_model(int argc, char** argv);
int run_chat(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_perplexity(int argc, char** argv);

}  // namespace ringlm::cli
