# expect-cause: carried-state
import math, random
import torch
from torch import nn


def getProjectionMatrix(znear=0.01, zfar=100.0, fov=math.radians(60)):
    t = math.tan(fov / 2) * znear
    P = torch.zeros(4, 4)
    P[0, 0] = P[1, 1] = znear / t
    P[3, 2], P[2, 2], P[2, 3] = 1.0, zfar / (zfar - znear), -(zfar * znear) / (zfar - znear)
    return P


class Camera:
    def __init__(self, colmap_id, R, T):
        self.colmap_id = colmap_id
        w2c = torch.eye(4)
        w2c[:3, :3], w2c[:3, 3] = R, T
        self.world_view_transform = w2c.transpose(0, 1)
        self.projection_matrix = getProjectionMatrix().transpose(0, 1)
        self.full_proj_transform = self.world_view_transform.unsqueeze(0).bmm(self.projection_matrix.unsqueeze(0)).squeeze(0)
        self.camera_center = self.world_view_transform.inverse()[3, :3]


class CameraOptModule(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.embeds = nn.Embedding(n, 6)
        nn.init.zeros_(self.embeds.weight)

    def forward(self, camtoworlds, embed_ids):
        d = self.embeds(embed_ids)
        wx, wy, wz = d[:, 3], d[:, 4], d[:, 5]
        o = torch.zeros_like(wx)
        skew = torch.stack([o, -wz, wy, wz, o, -wx, -wy, wx, o], -1).view(-1, 3, 3)
        delta = torch.eye(4).repeat(len(d), 1, 1)
        delta[:, :3, :3] = torch.matrix_exp(skew)
        delta[:, 3, :3] = d[:, :3]
        return torch.bmm(delta, camtoworlds)


def render(cam, gaussians, H=16, W=16):
    p_hom = torch.cat([gaussians["xyz"], torch.ones(len(gaussians["xyz"]), 1)], 1)
    p_proj = p_hom @ cam.full_proj_transform
    ndc = p_proj[:, :2] / (p_proj[:, 3:] + 1e-7)
    pix = (ndc + 1) * 0.5 * torch.tensor([W - 1.0, H - 1.0])
    ys, xs = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing="ij")
    d2 = (xs[..., None] - pix[:, 0]) ** 2 + (ys[..., None] - pix[:, 1]) ** 2
    return (torch.exp(-d2 / 2.0) @ torch.sigmoid(gaussians["rgb"])).permute(2, 0, 1)


def training(iterations=6):
    random.seed(0); torch.manual_seed(0)
    cameras = [Camera(i + 1, torch.eye(3), torch.tensor([0.3 * i - 0.3, 0.0, 4.0])) for i in range(3)]
    gaussians = {"xyz": nn.Parameter(torch.randn(32, 3)), "rgb": nn.Parameter(torch.zeros(32, 3))}
    gt_images = {cam.colmap_id: torch.rand(3, 16, 16) for cam in cameras}
    pose_adjust = CameraOptModule(len(cameras))
    optimizer = torch.optim.Adam([{"params": list(gaussians.values()), "lr": 0.01},
                                  {"params": pose_adjust.parameters(), "lr": 1e-3}])
    viewpoint_stack = None
    for iteration in range(1, iterations + 1):
        if not viewpoint_stack:
            viewpoint_stack = cameras.copy()
        viewpoint_cam = viewpoint_stack.pop(random.randint(0, len(viewpoint_stack) - 1))
        c2w = viewpoint_cam.world_view_transform.inverse().unsqueeze(0)
        adjusted_c2w = pose_adjust(c2w, torch.tensor([viewpoint_cam.colmap_id - 1])).squeeze(0)  # expect: forward
        viewpoint_cam.world_view_transform = adjusted_c2w.inverse()
        viewpoint_cam.camera_center = adjusted_c2w.inverse()[3, :3]
        viewpoint_cam.full_proj_transform = (adjusted_c2w.inverse().unsqueeze(0).bmm(viewpoint_cam.projection_matrix.unsqueeze(0))).squeeze(0)
        image = render(viewpoint_cam, gaussians)
        loss = (image - gt_images[viewpoint_cam.colmap_id]).abs().mean()
        loss.backward()  # expect: raises frees
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(iteration, loss.item())


training()
