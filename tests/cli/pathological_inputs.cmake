# Writes the inputs of the hostile-input tests (issue 9) into OUT: files too
# large, too deep or too odd to commit. Run once as a ctest fixture.
#   cmake -DOUT=<dir> -DSOURCE=<repository root> -P pathological_inputs.cmake
file(MAKE_DIRECTORY ${OUT})
string(ASCII 239 187 191 bom)

# Depth 10,000 nested arrays (20 KB) and depth 5,000 inline tables: toml11
# recursed once per level and overflowed the stack.
string(REPEAT "[" 10000 open)
string(REPEAT "]" 10000 close)
file(WRITE ${OUT}/nested-arrays.toml "model.hidden = ${open}${close}\n")
string(REPEAT "{a = " 5000 open)
string(REPEAT "}" 5000 close)
file(WRITE ${OUT}/nested-tables.toml "model.kind = \"mlp\"\nmodel.x = ${open}1${close}\n")
string(REPEAT "a." 20000 parts)
file(WRITE ${OUT}/deep-dotted-key.toml "model.kind = \"mlp\"\nmodel.${parts}a = 1\n")

# 300,000 list entries (0.9 MB, parsed in over 120 s before), and 60,000
# tables behind an unknown key on line 2 (24 s before).
string(REPEAT "1, " 299999 entries)
file(WRITE ${OUT}/long-list.toml "model.kind = \"mlp\"\nmodel.hidden = [${entries}1]\n")
set(tables "")
foreach(i RANGE 1 60000)
  string(APPEND tables "[t${i}]\nx = 1\n")
endforeach()
file(WRITE ${OUT}/many-tables.toml "model.kind = \"mlp\"\nmodel.bogus = 1\n${tables}")

# A schedule file of 17 MiB, over the 16 MiB limit, behind a valid deck.
string(REPEAT "# 64 bytes of padding, to make a schedule file too large to read\n" 16 kib)
string(REPEAT "${kib}" 17408 padding)
file(WRITE ${OUT}/huge-schedule.txt "schedule name=huge p=2 v=1 m=2\n${padding}")
file(WRITE ${OUT}/huge-schedule.toml
     "train.global_batch = 32\ntrain.microbatch_size = 16\npipeline.schedule_file = \"${OUT}/huge-schedule.txt\"\n")

# A byte order mark is accepted in decks and schedule files alike.
file(READ ${SOURCE}/inputs/quickstart.toml quickstart)
file(WRITE ${OUT}/bom-deck.toml "${bom}${quickstart}")
file(READ ${SOURCE}/tests/data/schedules/low-memory-1f1b-p3-m4.txt schedule)
file(WRITE ${OUT}/bom-schedule.txt "${bom}${schedule}")
file(READ ${SOURCE}/tests/data/schedules/low-memory-1f1b.toml deck)
string(REPLACE "tests/data/schedules/low-memory-1f1b-p3-m4.txt" "${OUT}/bom-schedule.txt" deck "${deck}")
file(WRITE ${OUT}/bom-schedule.toml "${deck}")

# A symlink loop.
file(REMOVE ${OUT}/loop.toml)
file(CREATE_LINK loop.toml ${OUT}/loop.toml SYMBOLIC)

# A 40 MiB text on one line: beyond what kpipe hands SentencePiece in one
# call (limits::subword_text_bytes), which held 4.9 GB encoding 64 MiB.
string(REPEAT "and God saw the light, that it was good " 16 line)
string(REPEAT "${line}" 65536 text)
file(WRITE ${OUT}/one-line-40mib.txt "${text}")
