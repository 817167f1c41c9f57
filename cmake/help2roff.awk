# SPDX-License-Identifier: MIT
#
# Turns one "rdps ... --help" text into man(7) source: a SYNOPSIS from its
# "usage:" lines and a DESCRIPTION from the rest. Run by rdps-man.sh, which
# writes .TH, NAME and SEE ALSO around it.
#
# The help texts follow one layout, which this reads:
#   usage: rdps CMD ...          the synopsis, with the indented lines after it
#          rdps CMD ...            (up to the first blank line)
#   Prose at column 0.           paragraphs (a blank line between them)
#   heading:                     a line at column 0 ending in ':', after a
#                                blank line or a list: a subsection
#     --opt ARG   what it does   a list item: a term, two or more spaces, its
#                 more of it       text, and lines indented deeper go on with it
#   example: rdps CMD ...        a literal example, with its indented lines
#
# Variables: nested=1 writes the synopsis as a literal block and headings as
# bold lines, for a help text shown inside another page (rdps bench KIND).

function esc(s) {               # text -> roff: backslashes, minus signs
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	return s
}
function line_out(s) {          # a text line: one starting with . or ' is text too
	if (s ~ /^[.']/)
		s = "\\&" s
	print s
}
function indent_of(s) {
	match(s, /^ */)
	return RLENGTH
}
function trim(s) {
	sub(/^ +/, "", s)
	sub(/ +$/, "", s)
	return s
}
# A term: options bold, placeholders (FILE, N, PDIR, ...) italic.
function term_out(t,    n, i, w, tail, out, parts) {
	n = split(t, parts, " ")
	out = ""
	for (i = 1; i <= n; i++) {
		w = parts[i]
		tail = ""
		if (w ~ /,$/) {
			tail = ","
			w = substr(w, 1, length(w) - 1)
		}
		if (w ~ /^-/)
			w = "\\fB" esc(w) "\\fR"
		else if (w ~ /^[A-Z][A-Z_0-9]*(\.\.\.)?$/)
			w = "\\fI" esc(w) "\\fR"
		else
			w = esc(w)
		out = out (i > 1 ? " " : "") w tail
	}
	line_out(out)
}
# Joins a piece of text to what is gathered; a word cut at a hyphen at the
# end of a line ("size-" / "constrained") is joined without a space.
function join(acc, s) {
	if (acc == "")
		return s
	if (acc ~ /[a-z]-$/ && s ~ /^[a-z]/)
		return acc s
	return acc " " s
}
function is_heading(i) {
	return L[i] ~ /^[^ ].*:$/ && length(L[i]) < 80 &&
		(i == first || L[i - 1] == "" || kind[i - 1] != "prose")
}
# Column where the text of item line i starts (0: none): after the first
# run of two or more spaces following its term.
function gap_col(i,    s, ind) {
	ind = indent_of(L[i])
	s = substr(L[i], ind + 1)
	if (!match(s, /[^ ]  +[^ ]/))
		return 0
	return ind + RSTART + RLENGTH - 1      # 1-based column of the text
}

{ L[++n] = $0; sub(/ +$/, "", L[n]) }

END {
	i = 1
	while (i <= n && L[i] == "")
		i++
	# Synopsis: "usage: " and the lines after it up to a blank line.
	if (L[i] ~ /^usage: /) {
		if (nested)
			print ".PP\n.nf"
		else
			print ".SH SYNOPSIS\n.nf"
		line_out(esc(substr(L[i], 8)))
		for (i++; i <= n && L[i] != ""; i++)
			line_out(esc(substr(L[i], 8)))
		print ".fi"
	}
	if (!nested)
		print ".SH DESCRIPTION"
	first = i
	while (first <= n && L[first] == "")
		first++

	# First pass: what each line is, and for a list item the column where
	# its text starts (tcol; 0 when it has none on its own line).
	last = 0                        # text column of the list's last item
	for (i = first; i <= n; i++) {
		ind = indent_of(L[i])
		if (L[i] == "") {
			kind[i] = "blank"; last = 0
		} else if (L[i] ~ /^examples?: /) {
			kind[i] = "example"
			for (j = i + 1; j <= n && L[j] != "" && indent_of(L[j]) > 0; j++)
				kind[j] = "example_more"
			i = j - 1
		} else if (is_heading(i)) {
			kind[i] = "heading"; last = 0
		} else if (ind <= 4 && (c = item_col(i, last)) >= 0) {
			kind[i] = "item"; tcol[i] = c
			if (c > 0)
				last = c
			for (j = i + 1; j <= n && L[j] != "" && indent_of(L[j]) > ind + 2; j++)
				kind[j] = "more"
			i = j - 1
		} else {
			kind[i] = "prose"; last = 0
		}
	}

	# Second pass: the roff.
	para = nested; prev = ""       # nested: the usage block before needs a break
	for (i = first; i <= n; i++) {
		k = kind[i]
		if (k == "blank") {
			para = 1
		} else if (k == "heading") {
			h = substr(L[i], 1, length(L[i]) - 1)
			if (nested) {
				print ".PP"
				line_out("\\fB" esc(h) "\\fR")
			} else {
				gsub(/"/, "\\(dq", h)
				h = toupper(substr(h, 1, 1)) substr(h, 2)
				print ".SS \"" esc(h) "\""
			}
			para = 0
		} else if (k == "example") {
			print ".PP"
			s = L[i]
			p = index(s, ":")
			line_out("\\fB" esc(substr(s, 1, p)) "\\fR")
			print ".RS 4\n.nf"
			line_out(esc(trim(substr(s, p + 1))))
			for (j = i + 1; j <= n && kind[j] == "example_more"; j++)
				line_out(esc(substr(L[j], p + 2)))
			print ".fi\n.RE"
			i = j - 1
			para = 1
		} else if (k == "item") {
			c = tcol[i]
			if (c > 0) {
				t = trim(substr(L[i], 1, c - 1))
				d = trim(substr(L[i], c))
			} else {
				t = trim(L[i])
				d = ""
			}
			for (j = i + 1; j <= n && kind[j] == "more"; j++)
				d = join(d, trim(L[j]))
			print ".TP"
			term_out(t)
			if (d != "")
				line_out(esc(d))
			i = j - 1
			para = 0
		} else {                                 # prose
			if (para || prev == "item" || prev == "example")
				print ".PP"
			line_out(esc(trim(L[i])))
			para = 0
		}
		if (k != "blank")
			prev = k
	}
}

# Whether line i is a list item: the text column of its item (1-based),
# 0 for an item whose text is only on the deeper lines after it, -1 if it
# is no item. last: the text column of the item before it in the list.
function item_col(i, last,    s, c, ind, deeper) {
	ind = indent_of(L[i])
	s = L[i]
	c = gap_col(i)
	if (c > 0) {
		# at column 0, a one-word term only ("wordnet   WN18 from ...")
		if (ind > 0 || substr(s, 1, c - 1) !~ /[^ ] +[^ ]/)
			return c
		return -1
	}
	deeper = i < n && L[i + 1] != "" && indent_of(L[i + 1]) > ind + 2 &&
		indent_of(L[i + 1]) >= 4
	# a term that runs into the list's text column with one space
	# ("--num_server_threads N threads serving ...")
	if (ind > 0 && last == 0 && deeper)
		last = indent_of(L[i + 1]) + 1
	if (ind > 0 && last > ind + 1 && substr(s, last - 1, 1) == " " &&
	    substr(s, last, 1) != " " && substr(s, last - 2, 1) != " ")
		return last
	return deeper ? 0 : -1
}
