"""Training scripts that trainctl ships to instances (train_ddp.py, train_neuron.py).

This folder is uploaded as-is (SageMaker's sourcedir.tar.gz, a copy on EC2 nodes) and its
scripts import their shared module as a sibling (``import trainctl_common``). Nothing here may
be imported by the trainctl CLI: importing this package must stay free of torch.
"""

import os

ENTRYPOINTS_DIR = os.path.dirname(os.path.abspath(__file__))
