#include "core/error.h"

namespace ringlm::detail {

void throw_error(const char* expr, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << msg;
  if (expr != nullptr) os << (msg.empty() ? "" : " ") << "[check failed: " << expr << "]";
  os << " (" << file << ":" << line << ")";
  throw Error(os.str());
}

}  // namespace ringlm::detail
