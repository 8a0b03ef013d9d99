# cmake -DIN=file -DOUT=header -DNAME=symbol -P embed_text.cmake
# Writes `static const char NAME[] = "<file's text>";` so a program carries the text.
file(READ "${IN}" text)
file(WRITE "${OUT}" "// Generated from ${IN} at build time.\n#pragma once\nstatic const char ${NAME}[] = R\"EMBED(${text})EMBED\";\n")
