# SPDX-License-Identifier: MIT
#
# One public header (include/rdps/NAME.h) -> a man(7) page per function it
# declares, NAME.3 in out. Run by rdps-man3.sh, which gives the functions
# the compiler found: list holds "LINE NAME" lines, LINE the first line of
# the declaration.
#
# What it reads of the header (the layout every header keeps):
#   /* Comment at column 0,          the comment of the declaration (or of
#    * ending the line before it. */  the group of declarations, no blank
#   int rdps_f(int a,                 line between them, that follows it)
#              int b);
#   static inline T rdps_g(...) {...} an inline: its prototype is shown
# In a comment, a blank line starts a paragraph, and lines indented two
# spaces deeper than the text are code (a literal block). The comment at
# the top of the header (after the SPDX line) says what the header is for;
# its sentence about return values is the convention for int functions
# whose own comment says nothing of them.
#
# Variables: header (client.h), version, out (directory), list.

function esc(s) {                  # text -> roff: backslashes, minus signs
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	return s
}
function text_out(s) {             # a text line: one starting with . or ' is text too
	s = esc(s)
	if (s ~ /^[.']/)
		s = "\\&" s
	return s
}
function fail(msg) {
	printf "header2man3.awk: include/rdps/%s: %s\n", header, msg > "/dev/stderr"
	failed = 1
	exit 1
}
# Comment lines s..e without their markers, into ctext[1..return].
function comment_lines(s, e,    i, t, n) {
	n = 0
	for (i = s; i <= e; i++) {
		t = line[i]
		if (i == e)
			sub(/[ \t]*\*+\/.*$/, "", t)
		if (i == s)
			sub(/^\/\*+ ?/, "", t)
		else
			sub(/^[ \t]*\* ?/, "", t)
		if ((i == s || i == e) && t ~ /^[ \t]*$/)
			continue
		ctext[++n] = t
	}
	return n
}
# The sentences of text (one paragraph, joined), into sent[1..return].
function sentences(text,    n, rest, at) {
	delete sent
	n = 0
	rest = text
	while (rest != "") {
		# A sentence ends at ". " before a capital, a digit, a minus or "(";
		# "e.g." and "i.e." do not end one.
		at = match(rest, /[^.][.] +[A-Z0-9(-]/)
		while (at && substr(rest, at - 2, 4) ~ /^(e\.g|i\.e)\./)
			at = match_from(rest, at + 2)
		if (!at) {
			sent[++n] = rest
			break
		}
		sent[++n] = substr(rest, 1, at + 1)
		rest = substr(rest, at + 2)
		sub(/^ +/, "", rest)
	}
	return n
}
function match_from(s, from,    r) {
	r = match(substr(s, from + 1), /[^.][.] +[A-Z0-9(-]/)
	return r ? r + from : 0
}
function is_return_sentence(s) {
	return s ~ /^(Returns?|The return value|On success|On failure)[ :,]/ ||
	       s ~ /^0(,)? (or |if |on |with |and |-E)/ || s ~ /^-E[A-Z]+/ || s ~ /^-errno/ ||
	       s ~ /[:;] -E[A-Z]+/ ||
	       s ~ /^(NULL|True|False) (if|when|for|on)/
}
# The paragraph being read (para: its text joined, para_roff: its lines as
# roff) ends: its first sentence and those about return values are noted,
# its lines appended to buf, which is returned.
function end_para(buf,    ns, k) {
	if (para == "")
		return buf
	ns = sentences(para)
	if (first_sentence == "")
		first_sentence = sent[1]
	for (k = 1; k <= ns; k++)
		if (is_return_sentence(sent[k]))
			rv[++nrv] = sent[k]
	buf = buf (buf == "" ? "" : ".PP\n") para_roff
	para = ""
	para_roff = ""
	return buf
}
# Paragraphs of comment lines 1..n as roff: DESCRIPTION's body; the
# sentences about return values are collected into rv[1..nrv].
function describe(n,    i, buf, lit) {
	buf = ""
	nrv = 0
	first_sentence = ""
	para = ""
	lit = 0
	for (i = 1; i <= n + 1; i++) {
		if (i <= n && ctext[i] ~ /^  / && !lit && para == "") {
			# code: every line indented as deep (or deeper, or blank in it)
			buf = buf (buf == "" ? "" : ".PP\n") ".RS 4\n.nf\n"
			lit = 1
		}
		if (lit) {
			if (i <= n && (ctext[i] ~ /^  / || (ctext[i] == "" && i < n && ctext[i + 1] ~ /^  /))) {
				t = ctext[i]
				sub(/^  /, "", t)
				buf = buf text_out(t) "\n"
				continue
			}
			buf = buf ".fi\n.RE\n"
			lit = 0
		}
		if (i > n || ctext[i] == "") {
			buf = end_para(buf)
			continue
		}
		if (ctext[i] ~ /^  / && para != "") {
			# code right after text, without a blank line
			i--
			buf = end_para(buf)
			continue
		}
		t = ctext[i]
		sub(/^[ \t]+/, "", t)
		para = para (para == "" ? "" : " ") t
		para_roff = para_roff text_out(t) "\n"
	}
	return buf
}
# The prototype of function k, one line, as declared (attributes dropped).
function prototype(k,    i, t, s) {
	s = ""
	for (i = dstart[k]; i <= dproto_end[k]; i++) {
		t = line[i]
		if (inline_fn[k] && i == dproto_end[k])
			sub(/[ \t]*\{.*$/, "", t)
		else if (i == dproto_end[k])
			sub(/;.*$/, "", t)
		s = s " " t
	}
	gsub(/__attribute__ *\(\(([^()]|\([^()]*\))*\)\)/, "", s)
	gsub(/[ \t]+/, " ", s)
	gsub(/\( /, "(", s)
	gsub(/ \)/, ")", s)
	sub(/^ /, "", s)
	sub(/ *;? *$/, "", s)
	return s ";"
}
# The prototype in roff, wrapped at its commas under its "(", the name bold.
function synopsis(k,    s, open, ind, parts, np, j, cur, outs, pad) {
	s = prototype(k)
	open = index(s, fname[k] "(")
	ind = open + length(fname[k])
	pad = sprintf("%" ind "s", "")
	np = split(s, parts, ", ")
	outs = ""
	cur = parts[1]
	for (j = 2; j <= np; j++) {
		if (length(cur) + 2 + length(parts[j]) > 78) {
			outs = outs bold_name(text_out(cur ","), k) "\n"
			cur = pad parts[j]
		} else {
			cur = cur ", " parts[j]
		}
	}
	outs = outs bold_name(text_out(cur), k) "\n"
	return outs
}
function bold_name(s, k,    name, at) {
	name = esc(fname[k]) "("
	at = index(s, name)
	if (at)
		s = substr(s, 1, at - 1) "\\fB" esc(fname[k]) "\\fR(" substr(s, at + length(name))
	return s
}
function return_type(k,    s) {
	s = prototype(k)
	s = substr(s, 1, index(s, fname[k] "(") - 1)
	sub(/^(static )?(inline )?(extern )?/, "", s)
	gsub(/ +$/, "", s)
	return s
}

{ line[NR] = $0 }

END {
	if (failed)
		exit 1
	nlines = NR
	# Comments that start at column 0: the line each ends on -> its first.
	for (i = 1; i <= nlines; i++) {
		if (line[i] !~ /^\/\*/)
			continue
		s = i
		while (i <= nlines && line[i] !~ /\*\//)
			i++
		cstart[i] = s
		if (!top_end && s > 1 && s <= 3)
			top_end = i
	}
	# The header's convention for return values (its top comment).
	convention = ""
	if (top_end) {
		n = comment_lines(cstart[top_end], top_end)
		para = ""
		for (i = 1; i <= n + 1; i++) {
			if (i > n || ctext[i] == "" || ctext[i] ~ /^  /) {
				ns = sentences(para)
				for (k = 1; k <= ns; k++)
					if (convention == "" && sent[k] ~ /[Rr]eturn/ && sent[k] ~ /(negative errno|-errno)/) {
						convention = sent[k]
						sub(/^[A-Z][a-z ]*: /, "", convention)
					}
				para = ""
				continue
			}
			t = ctext[i]
			sub(/^[ \t]+/, "", t)
			para = para (para == "" ? "" : " ") t
		}
	}
	# The functions and the lines their declarations take.
	nf = 0
	nlist = split(list, rows, "\n")
	for (r = 1; r <= nlist; r++) {
		if (rows[r] == "")
			continue
		split(rows[r], p, " ")
		k = ++nf
		dstart[k] = p[1] + 0
		fname[k] = p[2]
		if (index(line[dstart[k]], fname[k] "(") == 0)
			fail("line " dstart[k] " does not declare " fname[k] "(...): " line[dstart[k]])
		inline_fn[k] = line[dstart[k]] ~ /^static /
		for (i = dstart[k]; i <= nlines; i++) {
			if (inline_fn[k] ? index(line[i], "{") : index(line[i], ";"))
				break
		}
		if (i > nlines)
			fail("the declaration of " fname[k] " at line " dstart[k] " does not end")
		dproto_end[k] = i
		if (inline_fn[k]) {
			while (i <= nlines && line[i] !~ /^}/)
				i++
		}
		dend[k] = i
		ends_decl[i] = k
	}
	# Each function's comment: the one right above it, or above the group
	# of declarations it is in.
	for (k = 1; k <= nf; k++) {
		i = dstart[k] - 1
		own[k] = 1
		group_first[k] = k
		while (i > 0) {
			if (i in cstart) {
				ccom_s[k] = cstart[i]
				ccom_e[k] = i
				break
			}
			if (i in ends_decl) {
				own[k] = 0
				group_first[k] = ends_decl[i]
				i = dstart[ends_decl[i]] - 1
				continue
			}
			break
		}
		if (!(k in ccom_s))
			undocumented(k)
	}
	for (k = 1; k <= nf; k++) {
		page = out "/" fname[k] ".3"
		if (k in nodesc) {
			delete ctext
			ctext[1] = "Not described: include/rdps/" header " has no comment above its declaration (line " dstart[k] ")."
			n = 1
		} else {
			n = comment_lines(ccom_s[k], ccom_e[k])
		}
		body = describe(n)
		desc = first_sentence
		sub(/[.:]$/, "", desc)
		desc = lcfirst(desc)
		if (length(desc) > 110) {
			desc = substr(desc, 1, 107)
			sub(/ [^ ]*$/, "", desc)
			desc = desc "..."
		}
		printf ".\\\" Generated by cmake/rdps-man3.sh from include/rdps/%s; do not edit.\n", header > page
		printf ".TH \"%s\" 3 \"\" \"rdps %s\" \"rdps manual\"\n", toupper(fname[k]), version > page
		printf ".SH NAME\n%s \\- %s\n", esc(fname[k]), esc(desc) > page
		printf ".SH SYNOPSIS\n.nf\n.B #include <rdps/rdps.h>\n.PP\n" > page
		# The functions the comment speaks of, in header order.
		for (j = 1; j <= nf; j++)
			if (j == k || (!(k in nodesc) && !(j in nodesc) && ccom_s[j] == ccom_s[k]))
				printf "%s", synopsis(j) > page
		printf ".fi\n" > page
		printf ".SH DESCRIPTION\n%s", body > page
		printf ".PP\nDeclared in \\fB<rdps/%s>\\fR.\n", header > page
		rt = return_type(k)
		# The header's convention, unless the comment says what 0 means.
		says_zero = 0
		for (j = 1; j <= nrv; j++)
			if (rv[j] ~ /(^|[^-0-9.])0([^-.0-9]|\.$|$)/)
				says_zero = 1
		# A comment over a group speaks of the first one's return value.
		if (rt == "void" || !own[k])
			nrv = 0
		if (nrv > 0 || (rt == "int" && convention != "" && own[k])) {
			printf ".SH RETURN VALUE\n" > page
			if (rt == "int" && convention != "" && !says_zero)
				printf "As every function of \\fB<rdps/%s>\\fR: %s\n", header,
					text_out(lcfirst(convention)) > page
			for (j = 1; j <= nrv; j++)
				printf "%s\n", text_out(rv[j]) > page
		}
		printf ".SH SEE ALSO\n" > page
		m = 0
		for (j = 1; j <= nf; j++)
			if (j != k)
				others[++m] = fname[j]
		for (j = 1; j <= m; j++)
			printf ".BR %s (3)%s\n", esc(others[j]), j < m ? "," : "" > page
		if (m == 0)
			printf ".BR rdps (1)\n" > page
		close(page)
	}
}
# No comment: the page says so (install/man fails on it), the build goes on.
function undocumented(k) {
	printf "header2man3.awk: warning: include/rdps/%s:%d: %s has no comment (the comment above a declaration is its man page)\n",
		header, dstart[k], fname[k] > "/dev/stderr"
	nodesc[k] = 1
}
# "Reads rows" -> "reads rows"; "DGL-KE's" and "RDMA" stay.
function lcfirst(s) {
	if (substr(s, 2, 1) ~ /[a-z ]/)
		s = tolower(substr(s, 1, 1)) substr(s, 2)
	return s
}
