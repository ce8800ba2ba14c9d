/* nabla/export.h: what every public header needs to declare its functions.
 *
 * NB_API marks a function the shared library exports; the library is built
 * with hidden visibility, so it exports exactly the functions the headers
 * declare with it (tests/test_abi.sh checks). NB_BEGIN_DECLS and
 * NB_END_DECLS give the declarations C linkage in C++. */
#ifndef NABLA_EXPORT_H
#define NABLA_EXPORT_H

#ifndef NB_API
#if defined(_WIN32)
#define NB_API
#else
#define NB_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
#define NB_BEGIN_DECLS extern "C" {
#define NB_END_DECLS }
#else
#define NB_BEGIN_DECLS
#define NB_END_DECLS
#endif

#endif
