// A stand-in for allocmark-worker in runner tests: speaks the report protocol on fd 3 in ways the
// real worker only does under rare timing (FAKE_WORKER_MODE): a burst far larger than a pipe
// buffer written before a prompt exit, a line cut short, a hang while "loading".
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {
void say(const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left) {
    ssize_t n = ::write(3, p, left);
    if (n <= 0) std::_Exit(9);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const char* m = std::getenv("FAKE_WORKER_MODE");
  std::string mode = m ? m : "";
  if (mode == "hang") {
    for (;;) ::pause();
  }
  say("{\"event\":\"start\",\"library\":\"/fake/lib.so\",\"version\":\"1\",\"options\":{}}\n");
  say("{\"event\":\"baseline\",\"idle_rss_bytes\":1000,\"alloc_stats\":{}}\n");
  if (mode == "burst") {
    // A pipe this large lets the whole burst sit unread when the worker exits: everything after
    // the runner's first read must still be collected.
    ::fcntl(3, F_SETPIPE_SZ, 1 << 20);
    std::string filler(4000, 'x');
    for (int i = 0; i < 150; ++i)
      say("{\"event\":\"phase_end\",\"phase\":{\"name\":\"p" + std::to_string(i) +
          "\",\"peak_rss_bytes\":5000,\"peak_live_bytes\":2000,\"ops\":1,\"wall_s\":0.5,\"note\":\"" + filler + "\"}}\n");
    say("{\"event\":\"done\",\"alloc_stats\":{\"k\":1},\"contention\":{}}\n");
    return 0;
  }
  if (mode == "cut") {
    say("{\"event\":\"phase_end\",\"phase\":{\"name\":\"fill\"");
    return 0;
  }
  if (mode == "probe") {  // answers a probe like the real worker
    say("{\"event\":\"probe\",\"library\":\"/fake/lib.so\",\"version\":\"1\"}\n");
    return 0;
  }
  return 3;
}
