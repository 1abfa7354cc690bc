// The titan binary: train | launch | config | tokenize | generate ...
#include "titan/cli/commands.h"

int main(int argc, char** argv) { return titan::cli::main(argc, argv); }
