// libfovea's own translation unit: a shared library needs one. Its code is the engine's static module libraries,
// linked whole (cmake/FoveaInstall.cmake); the API it exports is include/fovea.
