"""A YOLOv5s-shaped detector (for kiln's benchmark corpus), written here in torch.

YoloS() is Ultralytics YOLOv5s's network at width 0.5 and depth 0.33 without its decoding of the
boxes: a 6x6 stride-2 stem, 3x3 stride-2 downsampling convs, C3 blocks (two 1x1 branches, one
through bottlenecks of a 1x1 and a 3x3 conv, the backbone's with a shortcut Add, concatenated
and merged by a 1x1), SPPF (three chained 5x5 max pools, concatenated), the PAN neck (nearest 2x
upsampling, Concat) and three 1x1 detection convs (3 anchors x 85 channels) at strides 8, 16 and
32. Every conv is Conv + BatchNorm + SiLU, which torch exports as Conv (BatchNorm folded), Sigmoid
and Mul. About 8.2 G multiply-adds per 640x640 image. What it shows: 3x3 convs with SiLU, some
followed by a residual Add, the main cost of the YOLO family.
"""
import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 1), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c = c2 // 2
        self.cv1, self.cv2, self.cv3 = Conv(c1, c), Conv(c1, c), Conv(2 * c, c2)
        self.m = nn.Sequential(*(Bottleneck(c, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        c = c1 // 2
        self.cv1, self.cv2, self.m = Conv(c1, c), Conv(4 * c, c2), nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class YoloS(nn.Module):
    def __init__(self, classes=80):
        super().__init__()
        self.stem = Conv(3, 32, 6, 2, 2)
        self.b1, self.b2 = Conv(32, 64, 3, 2), C3(64, 64, 1)
        self.b3, self.b4 = Conv(64, 128, 3, 2), C3(128, 128, 2)
        self.b5, self.b6 = Conv(128, 256, 3, 2), C3(256, 256, 3)
        self.b7, self.b8, self.sppf = Conv(256, 512, 3, 2), C3(512, 512, 1), SPPF(512, 512)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1, self.h2 = Conv(512, 256), C3(512, 256, 1, False)
        self.h3, self.h4 = Conv(256, 128), C3(256, 128, 1, False)
        self.h5, self.h6 = Conv(128, 128, 3, 2), C3(256, 256, 1, False)
        self.h7, self.h8 = Conv(256, 256, 3, 2), C3(512, 512, 1, False)
        self.detect = nn.ModuleList(nn.Conv2d(c, 3 * (classes + 5), 1) for c in (128, 256, 512))

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.stem(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.sppf(self.b8(self.b7(p4)))
        t5 = self.h1(p5)
        t4 = self.h3(self.h2(torch.cat((self.up(t5), p4), 1)))
        o3 = self.h4(torch.cat((self.up(t4), p3), 1))
        o4 = self.h6(torch.cat((self.h5(o3), t4), 1))
        o5 = self.h8(torch.cat((self.h7(o4), t5), 1))
        return tuple(d(o) for d, o in zip(self.detect, (o3, o4, o5)))
