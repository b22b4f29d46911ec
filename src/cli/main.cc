#include "cli/app.h"

int main(int argc, char** argv) { return myriad::cli::Main(argc, argv); }
