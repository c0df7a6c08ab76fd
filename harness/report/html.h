// A self-contained HTML document: styles and the table-sorting script are embedded, images are
// data: URIs, and nothing is loaded from elsewhere, so a page opens from a mail attachment or a CI
// artifact with no network. `allocmark report` writes one per results folder; `compare -o` reuses
// the same pieces. Every text given to these helpers is escaped here (and a long one cut:
// text_html); only raw() takes markup.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace allocmark::report::html {

// &, <, >, " and ' as entities: safe in element text and in quoted attribute values.
std::string escape(std::string_view text);

// Texts longer than this many bytes (a record's megabyte-long allocator name) are shown cut, with
// an ellipsis, and whole in the element's tooltip, so the page stays readable and quick to lay out.
inline constexpr std::size_t kLongText = 1000;
// A word (no space) longer than this many bytes may break anywhere so it wraps in its table cell.
inline constexpr std::size_t kLongWord = 40;
// Element text: escape(text) with control characters shown as \xHH, or for a long text its start
// and an ellipsis with the whole as the tooltip; a word longer than kLongWord may break anywhere.
std::string text_html(std::string_view text);
std::string base64(std::string_view bytes);
// data:MIME;base64,...
std::string data_uri(std::string_view mime, std::string_view bytes);
// A relative URL for a file path: every byte but letters, digits, "-._~/" percent-encoded, so a
// folder named "a#b" or "50%" still links to itself.
std::string path_href(std::string_view path);

struct TableCell {
  TableCell(std::string text = {}, std::optional<double> sort_key = {}, std::string detail = {}, std::string css_class = {})
      : text(std::move(text)), sort_key(sort_key), detail(std::move(detail)), css_class(std::move(css_class)) {}
  std::string text;
  // What a click on the column header sorts by; without one the text is compared (natural order:
  // "t2" before "t10").
  std::optional<double> sort_key;
  std::string detail;  // smaller text after the main one, e.g. "[min-max] n=3"
  std::string css_class;
  std::string href;  // the text links there when set (a file beside the page, relative to it)
};

struct Column {
  Column(std::string header, bool numeric = false, std::string tooltip = {})
      : header(std::move(header)), numeric(numeric), tooltip(std::move(tooltip)) {}
  std::string header;
  bool numeric = false;  // right-aligned
  std::string tooltip;
};

struct Table {
  std::string id;  // the element id; tests and anchors find the table by it
  std::vector<Column> columns;
  std::vector<std::vector<TableCell>> rows;
  bool sortable = false;  // headers sort the rows on click (ascending, then descending)
  std::string css_class;  // "answer": cells wrap so the table fits a narrow window
};

class Document {
 public:
  explicit Document(std::string title);

  void heading(int level, std::string_view text, std::string_view id = "");
  // Links to the given (id, label) anchors of this page.
  void contents(const std::vector<std::pair<std::string, std::string>>& anchors);
  void paragraph(std::string_view text, std::string_view css_class = "");
  // A definition list of (term, value) pairs: the machine, the matrix.
  void facts(const std::vector<std::pair<std::string, std::string>>& items);
  void bullets(const std::vector<std::string>& items, std::string_view css_class = "");
  void table(const Table& table);
  // An embedded image with its caption; `bytes` is the file's content.
  void figure(std::string_view mime, std::string_view bytes, std::string_view alt, std::string_view caption,
              std::string_view id = "");
  void code(std::string_view text);
  // A collapsible block (<details>): what is added until close_details() shows under `summary`
  // when the reader opens it. Blocks do not nest.
  void open_details(std::string_view summary, std::string_view id = "", bool open = false);
  void close_details();
  // Markup written as given: the caller guarantees it is well formed and escaped.
  void raw(std::string_view markup);

  // The whole page: doctype, head with the embedded style (and the sorting script when a sortable
  // table was added), the body so far.
  std::string str() const;

 private:
  // An element id used twice would make getElementById (anchors, tests) find the wrong one.
  std::string id_attribute(std::string_view id);

  std::string title_;
  std::string body_;
  std::set<std::string, std::less<>> ids_;
  bool sortable_ = false;
};

}  // namespace allocmark::report::html
