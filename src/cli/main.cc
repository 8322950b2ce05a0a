#include <cstdio>

int main() {
  std::puts("ringlm");
  return 0;
}
