"""An instance's volumes as EC2 makes them from its image and its launch's block device mappings, where moto
does not: the image's own mappings first (its root, at RootDeviceName, from its snapshot), then the launch's,
which replace an image mapping only under the same device name (EC2 User Guide, "Block device mappings":
"you can ... override the block device mappings of the AMI"; "Device names on Amazon EC2 instances": the root is
/dev/sda1 or /dev/xvda, by AMI). A launch that maps /dev/sda1 on an image whose root is /dev/xvda gets two volumes:
the image's root, at its snapshot's size, and an unused extra one. moto attaches only what the launch maps.
"""
from __future__ import annotations

from typing import Any

# The seeded DLAMIs' root snapshot (DescribeImages' BlockDeviceMappings); ASSUMED, AWS sizes them per release
IMAGE_ROOT_GIB = 100


def complete(backend: Any, instances: list[Any], requested: list[dict] | None) -> None:
    """Give each instance the image's root volume when the launch's mappings do not name the image's root
    device. `requested`: the launch's BlockDeviceMappings (the request's or its template's)."""
    names = {m.get("DeviceName") for m in requested or []}
    for instance in instances:
        image = backend.amis.get(instance.image_id)
        root = getattr(image, "root_device_name", None)
        if not root or root in instance.block_device_mapping:
            continue
        if not names and "/dev/sda1" in instance.block_device_mapping:
            # no mapping asked for: moto's default root sits at /dev/sda1; EC2 puts it at the image's root device
            volume = instance.block_device_mapping["/dev/sda1"]
            backend.detach_volume(volume.volume_id, instance.id, "/dev/sda1")
            backend.attach_volume(volume.volume_id, instance.id, root, True)
            continue
        instance.add_block_device(IMAGE_ROOT_GIB, root, None, False, True, None, volume_type="gp3")
