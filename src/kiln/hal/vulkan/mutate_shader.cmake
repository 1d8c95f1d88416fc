# Writes OUTPUT: SOURCE with the text FROM replaced by TO, which must occur exactly once in it (so
# a mutant never silently equals its shader after the shader changes).
file(READ ${SOURCE} text)
string(FIND "${text}" "${FROM}" first)
string(FIND "${text}" "${FROM}" last REVERSE)
if(first EQUAL -1)
  message(FATAL_ERROR "mutant of ${SOURCE}: '${FROM}' is not in the shader any more; update the mutant in CMakeLists.txt")
endif()
if(NOT first EQUAL last)
  message(FATAL_ERROR "mutant of ${SOURCE}: '${FROM}' occurs more than once")
endif()
string(REPLACE "${FROM}" "${TO}" mutated "${text}")
file(WRITE ${OUTPUT} "${mutated}")
