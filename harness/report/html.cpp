#include "harness/report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/results/safe_text.h"

namespace allocmark::report::html {

namespace {

// Plain system fonts only: a web font would be a request.
constexpr std::string_view kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 2em auto;
       max-width: 1400px; padding: 0 1.5em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
/* A table wider than the window scrolls inside its box; the page itself never scrolls sideways. */
.table-box { max-width: 100%; overflow-x: auto; }
details { margin: 0.8em 0; }
details > summary { cursor: pointer; font-size: 1.1em; font-weight: 600; padding: 0.3em 0; }
.answer th { white-space: normal; }
.answer td { overflow-wrap: break-word; }
.answer td.num { white-space: nowrap; }
/* Several numeric columns with their [min-max] (the return curve): where the window is too narrow for
   both on a line the range goes under its median (never broken itself), and a long allocator name
   breaks inside its cell, rather than the table leaving the page. */
.stacked td { overflow-wrap: anywhere; }
.stacked td.num { white-space: normal; }
.stacked td.num .detail { display: inline-block; }
th, td { border: 1px solid #d6d6d6; padding: 0.25em 0.6em; vertical-align: top; }
.unbroken { overflow-wrap: anywhere; }
th { background: #f2f2f4; text-align: left; white-space: nowrap; }
td.num, th.num { text-align: right; }
tbody tr:nth-child(even) { background: #fafafa; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort="ascending"]::after { content: " \25B2"; font-size: 0.75em; }
table.sortable th[aria-sort="descending"]::after { content: " \25BC"; font-size: 0.75em; }
.detail { color: #666; font-size: 0.85em; margin-left: 0.35em; white-space: nowrap; }
.bad { color: #b00020; font-weight: 600; }
.warn { color: #8a5a00; }
.good { color: #1b6e20; }
.choice { font-weight: 600; font-size: 1.1em; }
.note { color: #555; }
.banner { background: #fff3cd; border: 1px solid #d9a400; padding: 0.6em 0.9em; font-weight: 600; }
nav { margin: 0.8em 0; }
nav a { color: #0b57d0; text-decoration: none; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.15em 1.2em; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
figcaption { color: #555; font-size: 0.9em; }
pre { background: #f6f6f8; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
)css";

// Sorts a table.sortable by the clicked column: by each cell's data-sort number when it has one
// (cells without one go last), else by text in natural order; a second click reverses.
constexpr std::string_view kSortScript = R"js(
(function () {
  function key(row, i) { return row.cells[i]; }
  function compare(a, b, i, dir) {
    var ca = key(a, i), cb = key(b, i);
    var na = ca.hasAttribute("data-sort"), nb = cb.hasAttribute("data-sort");
    if (na && nb) return dir * (parseFloat(ca.getAttribute("data-sort")) - parseFloat(cb.getAttribute("data-sort")));
    if (na !== nb) return na ? -1 : 1;
    return dir * ca.textContent.localeCompare(cb.textContent, undefined, {numeric: true});
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, i) {
      th.title = (th.title ? th.title + " - " : "") + "click to sort";
      th.addEventListener("click", function () {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) { return compare(a, b, i, dir); });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
)js";

std::string attribute(std::string_view name, std::string_view value) {
  return value.empty() ? "" : fmt::format(" {}=\"{}\"", name, escape(value));
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  return out;
}

namespace {

// The first `limit` bytes of `text` or fewer, never ending inside a UTF-8 character.
std::string_view cut(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return text;
  while (limit > 0 && (static_cast<unsigned char>(text[limit]) & 0xC0) == 0x80) --limit;
  return text.substr(0, limit);
}

}  // namespace

std::string text_html(std::string_view raw) {
  // A record's text may hold control characters (an allocator named with ESC[2J): shown as \xHH.
  const std::string text = results::terminal_text(raw);
  // A word longer than a column can be (a name of hundreds of letters) may break anywhere, so that
  // it wraps inside its cell instead of pushing the table off the page; ordinary words never do.
  std::size_t run = 0, longest = 0;
  for (char c : text) longest = std::max(longest, run = (c == ' ' || c == '\n' || c == '\t') ? 0 : run + 1);
  const char* wrap = longest > kLongWord ? " class=\"unbroken\"" : "";
  if (text.size() <= kLongText) return longest > kLongWord ? fmt::format("<span{}>{}</span>", wrap, escape(text)) : escape(text);
  return fmt::format("<span{} title=\"{}\">{}&hellip;</span>", wrap, escape(text), escape(cut(text, kLongText)));
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8 |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
  }
  if (std::size_t rest = bytes.size() - i) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::string data_uri(std::string_view mime, std::string_view bytes) {
  return fmt::format("data:{};base64,{}", mime, base64(bytes));
}

std::string path_href(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

Document::Document(std::string title) : title_(std::move(title)) {}

std::string Document::id_attribute(std::string_view id) {
  if (id.empty()) return "";
  if (!ids_.emplace(id).second) throw std::logic_error(fmt::format("HTML id '{}' used twice in one document", id));
  return attribute("id", id);
}

void Document::heading(int level, std::string_view text, std::string_view id) {
  body_ += fmt::format("<h{0}{1}>{2}</h{0}>\n", level, id_attribute(id), text_html(text));
}

void Document::contents(const std::vector<std::pair<std::string, std::string>>& anchors) {
  body_ += "<nav>";
  for (std::size_t i = 0; i < anchors.size(); ++i)
    body_ += fmt::format("{}<a href=\"#{}\">{}</a>", i ? " &middot; " : "", escape(anchors[i].first), text_html(anchors[i].second));
  body_ += "</nav>\n";
}

void Document::paragraph(std::string_view text, std::string_view css_class) {
  body_ += fmt::format("<p{}>{}</p>\n", attribute("class", css_class), text_html(text));
}

void Document::facts(const std::vector<std::pair<std::string, std::string>>& items) {
  body_ += "<dl class=\"facts\">\n";
  for (const auto& [term, value] : items) body_ += fmt::format("<dt>{}</dt><dd>{}</dd>\n", text_html(term), text_html(value));
  body_ += "</dl>\n";
}

void Document::bullets(const std::vector<std::string>& items, std::string_view css_class) {
  body_ += fmt::format("<ul{}>\n", attribute("class", css_class));
  for (const auto& item : items) body_ += "<li>" + text_html(item) + "</li>\n";
  body_ += "</ul>\n";
}

void Document::table(const Table& table) {
  sortable_ = sortable_ || table.sortable;
  body_ += fmt::format("<div class=\"table-box\"><table{}{}>\n<thead><tr>", id_attribute(table.id),
                       attribute("class", table.css_class + (table.sortable && !table.css_class.empty() ? " " : "") +
                                              (table.sortable ? "sortable" : "")));
  for (const auto& c : table.columns)
    body_ += fmt::format("<th{}{}>{}</th>", attribute("class", c.numeric ? "num" : ""), attribute("title", c.tooltip),
                         escape(c.header));
  body_ += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    body_ += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const TableCell& cell = row[i];
      std::string css = cell.css_class;
      if (i < table.columns.size() && table.columns[i].numeric) css += css.empty() ? "num" : " num";
      std::string sort;
      if (cell.sort_key && std::isfinite(*cell.sort_key)) sort = fmt::format(" data-sort=\"{:.17g}\"", *cell.sort_key);
      const std::string text = cell.href.empty() ? text_html(cell.text)
                                                 : fmt::format("<a{}>{}</a>", attribute("href", cell.href), text_html(cell.text));
      body_ += fmt::format("<td{}{}>{}", attribute("class", css), sort, text);
      if (!cell.detail.empty()) body_ += "<span class=\"detail\">" + text_html(cell.detail) + "</span>";
      body_ += "</td>";
    }
    body_ += "</tr>\n";
  }
  body_ += "</tbody>\n</table></div>\n";
}

void Document::figure(std::string_view mime, std::string_view bytes, std::string_view alt, std::string_view caption,
                      std::string_view id) {
  body_ += fmt::format("<figure{}><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>\n",
                       id_attribute(id), data_uri(mime, bytes), escape(cut(alt, kLongText)), text_html(caption));
}

void Document::open_details(std::string_view summary, std::string_view id, bool open) {
  body_ += fmt::format("<details{}{}><summary>{}</summary>\n", id_attribute(id), open ? " open" : "", text_html(summary));
}

void Document::close_details() { body_ += "</details>\n"; }

void Document::code(std::string_view text) { body_ += "<pre>" + text_html(text) + "</pre>\n"; }

void Document::raw(std::string_view markup) { body_ += markup; }

std::string Document::str() const {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // The page may load nothing: say so to the browser too, so a stray reference fails loudly.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n",
      escape(cut(title_, kLongText)), kStyle);
  out += body_;
  if (sortable_) out += fmt::format("<script>{}</script>\n", kSortScript);
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace allocmark::report::html
