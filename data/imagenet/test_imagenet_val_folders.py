"""imagenet_val_folders.py on a three-class fake development kit."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import numpy
    import scipy.io
except ImportError:  # the script needs scipy; so does its test
    scipy = None


def fake_devkit(root):
    data = os.path.join(root, "devkit", "data")
    os.makedirs(data)
    # Two leaves (IDs 1 and 2) and one inner node (ID 1001) as in meta.mat.
    synsets = numpy.zeros((3,), dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")])
    synsets[0] = (2, "n02000002", 0)
    synsets[1] = (1, "n01000001", 0)
    synsets[2] = (1001, "n00001740", 2)
    scipy.io.savemat(os.path.join(data, "meta.mat"), {"synsets": synsets})
    with open(os.path.join(data, "ILSVRC2012_validation_ground_truth.txt"), "w") as f:
        f.write("2\n1\n2\n")
    val = os.path.join(root, "val")
    os.makedirs(val)
    for n in (1, 2, 3):
        with open(os.path.join(val, f"ILSVRC2012_val_{n:08d}.JPEG"), "w") as f:
            f.write(str(n))
    return val, os.path.join(root, "devkit")


@unittest.skipIf(scipy is None, "needs numpy and scipy")
class ValFolders(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "imagenet_val_folders.py"), *args],
                              capture_output=True, text=True)

    def test_moves_each_image_into_its_class_folder_and_resumes(self):
        with tempfile.TemporaryDirectory() as root:
            val, devkit = fake_devkit(root)
            r = self.run_script(val, "--devkit", devkit)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(os.path.join(val, "n02000002"))),
                             ["ILSVRC2012_val_00000001.JPEG", "ILSVRC2012_val_00000003.JPEG"])
            self.assertEqual(os.listdir(os.path.join(val, "n01000001")), ["ILSVRC2012_val_00000002.JPEG"])
            self.assertIn("moved 3 images (0 already in place) into 2 class folders", r.stdout)
            again = self.run_script(val, "--devkit", devkit)
            self.assertIn("moved 0 images (3 already in place)", again.stdout)

    def test_a_missing_image_is_named(self):
        with tempfile.TemporaryDirectory() as root:
            val, devkit = fake_devkit(root)
            os.remove(os.path.join(val, "ILSVRC2012_val_00000002.JPEG"))
            r = self.run_script(val, "--devkit", devkit)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("ILSVRC2012_val_00000002.JPEG' does not exist (ground truth line 2)", r.stderr)


if __name__ == "__main__":
    unittest.main()
