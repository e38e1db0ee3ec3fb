print("vkms-modeset: not built yet")
