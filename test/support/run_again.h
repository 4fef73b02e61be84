/* SPDX-License-Identifier: BSD-2-Clause */
// For test programs whose options must be set before the allocator starts
// (it reads DUCTILE_CONF at the first allocation, before main): main runs
// the program again with them, in a fresh directory for the files it
// writes, and removes the directory afterwards.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ductile::test {

// Where the environment variable `dir_var` is set, this is the run again:
// returns -1, and main goes on with the tests (the directory is in
// getenv(dir_var)). Otherwise makes a directory named after `name` under
// $TMPDIR (or /tmp), runs this program again with DUCTILE_CONF set to
// `conf`, the directory and `tail`, and `dir_var` set to it; removes the
// directory and returns the run's exit status, which main returns.
inline int run_again_with_conf(char** argv, const char* dir_var, const char* name, const std::string& conf,
                               const char* tail = "") {
  if (getenv(dir_var) != nullptr) return -1;
  const char* tmp = getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/" + name + ".XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  if (dir == nullptr) return 1;
  setenv("DUCTILE_CONF", (conf + dir + tail).c_str(), 1);
  setenv(dir_var, dir, 1);
  pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::string rm = std::string("rm -rf ") + dir;
  if (system(rm.c_str()) != 0) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace ductile::test
