// The web chat page served at GET /: one static HTML document (inline CSS and JS) that streams
// replies from /v1/chat/completions with fetch() and parses the SSE stream itself.
#pragma once

#include <string_view>

namespace ringlm::server {

std::string_view web_page_html();

}  // namespace ringlm::server
