// tools/cli.hpp - what the tools share for their command lines and JSON:
// CLI11 with one grammar (short and long options, "--opt=value" and
// "--opt value", "--" ends options, unknown options refused), the help text
// each tool writes itself, exit status 2 for usage errors; JSON strings from
// nlohmann-json, with bytes that are not UTF-8 replaced by U+FFFD so the
// output is always valid JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cmwq_tools {

constexpr int exit_usage = 2;

// An app whose -h/--help prints `help` (the tool's own text) and exits 0.
inline void add_help(CLI::App &app, const std::string &help)
{
	app.set_help_flag();
	app.add_flag_callback(
		"-h,--help",
		[help] {
			std::fputs(help.c_str(), stdout);
			std::exit(0);
		},
		"this text");
}

// Parses, or prints "<tool>: <what is wrong>", the usage line, and exits 2.
inline void parse_or_exit(CLI::App &app, int argc, char **argv, const char *tool, const char *usage)
{
	try {
		app.parse(argc, argv);
	} catch (const CLI::ParseError &e) {
		std::fprintf(stderr, "%s: %s\n\n%s", tool, e.what(), usage);
		std::exit(exit_usage);
	}
}

// A JSON string literal for s (any bytes).
inline std::string json_string(const std::string &s)
{
	return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The control protocol writes control characters in names as \xNN; the
// bytes they stand for.
inline std::string unescape_name(const std::string &s)
{
	std::string out;
	for (std::size_t i = 0; i < s.size(); i++) {
		if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' &&
		    std::isxdigit(static_cast<unsigned char>(s[i + 2])) &&
		    std::isxdigit(static_cast<unsigned char>(s[i + 3]))) {
			out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
			i += 3;
		} else {
			out += s[i];
		}
	}
	return out;
}

} // namespace cmwq_tools
