# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)


def to_params(x, device="cpu"):
    return x.detach().clone().to(device).requires_grad_(True)


class SMPLLayer(nn.Module):
    def __init__(self, n_verts=60, n_betas=10, n_joints=8):
        super().__init__()
        self.register_buffer("v_template", torch.randn(n_verts, 3))
        self.register_buffer("shapedirs", torch.randn(n_verts, 3, n_betas) * 0.05)
        self.register_buffer("posedirs", torch.randn(n_verts, 3, n_joints * 3) * 0.02)

    def forward(self, betas, body_pose, transl):
        v = self.v_template + torch.einsum("vck,bk->bvc", self.shapedirs, betas)
        v = v + torch.einsum("vck,bk->bvc", self.posedirs, torch.sin(body_pose))  # expect: forward
        return v + transl[:, None, :]


class SKEL(nn.Module):
    def __init__(self, n_verts=60, n_dofs=12, n_betas=10):
        super().__init__()
        self.register_buffer("skin_template", torch.randn(n_verts, 3))
        self.register_buffer("dof_dirs", torch.randn(n_verts, 3, n_dofs) * 0.05)
        self.register_buffer("shape_dirs", torch.randn(n_verts, 3, n_betas) * 0.05)

    def forward(self, poses, betas, trans):
        v = self.skin_template + torch.einsum("vck,bk->bvc", self.dof_dirs, torch.tanh(poses))
        v = v + torch.einsum("vck,bk->bvc", self.shape_dirs, betas)
        return v + trans[:, None, :]


class SkelFitter:
    def __init__(self):
        self.smpl = SMPLLayer()
        self.skel = SKEL()

    def _fit_batch(self, smpl_data, n_iter=3):
        smpl_output = self.smpl(smpl_data["betas"], smpl_data["body_pose"], smpl_data["transl"])
        target_verts = smpl_output

        B = target_verts.shape[0]
        poses = to_params(torch.zeros(B, 12))
        betas = to_params(torch.zeros(B, 10))
        trans = to_params(target_verts.mean(1).detach())
        optimizer = torch.optim.LBFGS([poses, betas, trans], lr=0.5, max_iter=5, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            skel_verts = self.skel(poses, betas, trans)
            loss = ((skel_verts - target_verts) ** 2).sum(-1).mean()
            loss = loss + 1e-3 * (poses ** 2).mean()
            loss.backward()  # expect: raises frees
            return loss

        for it in range(n_iter):
            loss = optimizer.step(closure)
            print(f"  iter {it} loss {loss.item():.4f}")
        return poses.detach(), betas.detach(), trans.detach()

    def run_fit(self, seq):
        results = []
        for start in range(0, seq["betas"].shape[0], 4):
            batch = {k: to_params(v[start:start + 4]) for k, v in seq.items()}
            results.append(self._fit_batch(batch))
        return results


seq = {"betas": torch.randn(8, 10), "body_pose": torch.randn(8, 24), "transl": torch.randn(8, 3)}
fitter = SkelFitter()
out = fitter.run_fit(seq)
print("fitted", len(out), "batches")
