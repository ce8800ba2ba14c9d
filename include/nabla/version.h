/* nabla/version.h: the library's version, apart from the umbrella header so
 * that code below it (the ONNX exporter's producer_version) can name it. */
#ifndef NABLA_VERSION_H
#define NABLA_VERSION_H

#define NABLA_VERSION_MAJOR 0
#define NABLA_VERSION_MINOR 1
#define NABLA_VERSION_PATCH 0
#define NABLA_VERSION "0.1.0"

#endif
