// Errors carry the template line and a clear message; raise_exception carries its text; hostile
// templates hit the resource limits instead of exhausting the stack, memory or time.
#include <gtest/gtest.h>

#include "tokenizer/jinja/chat_template.h"

namespace ringlm::jinja {
namespace {

using ojson = nlohmann::ordered_json;

TemplateError render_error(const std::string& src, const ojson& ctx = ojson::object(),
                           const RenderOptions& opt = {}) {
  try {
    Template::parse(src).render(ctx, opt);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << src;
  return TemplateError(ErrorKind::Type, 0, "");
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  TemplateError e = render_error("line1\n{% if true %}\nx\n{% endfor %}\n");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();

  e = render_error("a\nb\n{{ 'unterminated }}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 3);

  e = render_error("{% for x in y %}\n{{ x }}\n");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos) << e.what();
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  TemplateError e = render_error("ok\n\n{{ messages[0].content.nope.deeper }}",
                                 ojson{{"messages", ojson::array({ojson{{"content", "x"}}})}});
  EXPECT_EQ(e.kind(), ErrorKind::Undefined);
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(std::string(e.what()).find("has no attribute 'nope'"), std::string::npos) << e.what();

  e = render_error("{% for m in messages %}\n{{ m.content + 1 }}\n{% endfor %}",
                   ojson{{"messages", ojson::array({ojson{{"content", "x"}}})}});
  EXPECT_EQ(e.kind(), ErrorKind::Type);
  EXPECT_EQ(e.line(), 2);
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  TemplateError e = render_error(
      "{% if messages|length == 0 %}\n{{ raise_exception('No messages!') }}{% endif %}",
      ojson{{"messages", ojson::array()}});
  EXPECT_EQ(e.kind(), ErrorKind::Raised);
  EXPECT_EQ(e.detail(), "No messages!");
  EXPECT_EQ(e.line(), 2);
}

TEST(JinjaErrors, SandboxBlocksMutation) {
  TemplateError e = render_error("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_EQ(e.kind(), ErrorKind::Security);
  e = render_error("{{ d.update({'a': 1}) }}", ojson{{"d", ojson::object()}});
  EXPECT_EQ(e.kind(), ErrorKind::Security);
}

TEST(JinjaErrors, InvalidUtf8TemplateIsRejected) {
  EXPECT_THROW(Template::parse(std::string("{{ 'a\xff' }}")), TemplateError);
}

TEST(JinjaLimits, UnboundedRecursionStops) {
  TemplateError e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  e = render_error("{% for m in [[1]] recursive %}{{ loop([m]) }}{% endfor %}");
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
}

TEST(JinjaLimits, DeepNestingIsASyntaxErrorNotAStackOverflow) {
  std::string deep(100000, '(');
  EXPECT_THROW(Template::parse("{{ " + deep + "1 }}"), TemplateError);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(Template::parse(ifs), TemplateError);
  // Long elif chains are flat, not nested.
  std::string chain = "{% if false %}";
  for (int i = 0; i < 2000; ++i) chain += "{% elif false %}";
  chain += "{% else %}ok{% endif %}";
  EXPECT_EQ(Template::parse(chain).render(ojson::object()), "ok");
}

TEST(JinjaLimits, StringAndListGrowthIsBounded) {
  RenderOptions opt;
  opt.limits.max_string_bytes = 1 << 20;
  TemplateError e = render_error(
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% "
      "endfor %}",
      ojson::object(), opt);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  e = render_error("{{ 'x' * 100000000000 }}", ojson::object(), opt);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  e = render_error("{{ [1] * 100000000000 }}", ojson::object(), opt);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  e = render_error(
      "{% set ns = namespace(l=[0]) %}{% for i in range(300) %}{% set ns.l = [ns.l] %}{% endfor "
      "%}");
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
}

TEST(JinjaLimits, WorkIsBounded) {
  RenderOptions opt;
  opt.limits.max_steps = 100000;
  TemplateError e = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      ojson::object(), opt);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
}

TEST(JinjaLimits, SelfReferencingNamespacePrintsAndDoesNotLeak) {
  // Python prints the cycle as {...}; the interpreter must not loop or leak.
  std::string out = Template::parse("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}")
                        .render(ojson::object());
  EXPECT_EQ(out, "<Namespace {'me': <Namespace {...}>}>");
}

TEST(ChatTemplate, PassesTransformersVariables) {
  ChatTemplateInputs in;
  in.messages = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  in.add_generation_prompt = true;
  in.special_tokens = ojson{{"bos_token", "<s>"}};
  in.extra = ojson{{"enable_thinking", false}};
  std::string out = render_chat(
      "{{ bos_token }}{{ tools is none }}{{ documents is none }}{{ enable_thinking }}"
      "{{ add_generation_prompt }}{{ messages[0].content }}{{ eos_token is defined }}",
      in);
  EXPECT_EQ(out, "<s>TrueTrueFalseTruehiFalse");
}

TEST(ChatTemplate, ContinueFinalMessage) {
  ChatTemplateInputs in;
  in.messages = ojson::parse(
      R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "The answer is "}])");
  in.continue_final_message = true;
  std::string tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</s>{% endfor %}";
  EXPECT_EQ(render_chat(tmpl, in), "<user>q</s><assistant>The answer is");
  in.add_generation_prompt = true;
  EXPECT_THROW(render_chat(tmpl, in), ringlm::Error);
}

}  // namespace
}  // namespace ringlm::jinja
