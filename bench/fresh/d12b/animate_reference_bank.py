# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
DIM, TOKENS = 32, 16


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))


def hacked_basic_transformer_inner_forward(self, hidden_states):
    norm_hidden_states = self.norm1(hidden_states)  # expect: forward
    if self.MODE == "write":
        self.bank.append(norm_hidden_states.clone())
        attn_output = self.attn1(norm_hidden_states, norm_hidden_states, norm_hidden_states)[0]
    else:
        modify_norm_hidden_states = torch.cat([norm_hidden_states] + self.bank, dim=1)
        attn_output = self.attn1(norm_hidden_states, modify_norm_hidden_states, modify_norm_hidden_states)[0]
    hidden_states = attn_output + hidden_states
    return self.ff(self.norm3(hidden_states)) + hidden_states

class ReferenceAttentionControl:
    def __init__(self, unet, mode="write"):
        self.unet = unet
        for module in self.unet.blocks:
            module.forward = hacked_basic_transformer_inner_forward.__get__(module, BasicTransformerBlock)
            module.MODE, module.bank = mode, []

    def update(self, writer):
        for r, w in zip(self.unet.blocks, writer.unet.blocks):
            r.bank = [v.clone() for v in w.bank]

    def clear(self):
        for r in self.unet.blocks:
            r.bank.clear()


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj_in = nn.Linear(4, DIM)
        self.blocks = nn.ModuleList([BasicTransformerBlock(DIM) for _ in range(2)])
        self.proj_out = nn.Linear(DIM, 4)

    def forward(self, latents, cond=0.0):
        h = self.proj_in(latents) + cond
        for block in self.blocks:
            h = block(h)
        return self.proj_out(h)

class Net(nn.Module):
    def __init__(self, reference_unet, denoising_unet, pose_guider, writer, reader):
        super().__init__()
        self.reference_unet, self.denoising_unet, self.pose_guider = reference_unet, denoising_unet, pose_guider
        self.reference_control_writer, self.reference_control_reader = writer, reader

    def forward(self, noisy_latents, ref_image_latents, pose_img):
        self.reference_unet(ref_image_latents)
        self.reference_control_reader.update(self.reference_control_writer)
        return self.denoising_unet(noisy_latents, cond=self.pose_guider(pose_img))


reference_unet, denoising_unet = UNet(), UNet()
reference_control_writer = ReferenceAttentionControl(reference_unet, mode="write")
reference_control_reader = ReferenceAttentionControl(denoising_unet, mode="read")
net = Net(reference_unet, denoising_unet, nn.Linear(3, DIM), reference_control_writer, reference_control_reader)
trainable_params = list(net.parameters())
optimizer = torch.optim.AdamW(trainable_params, lr=1e-4)
gradient_accumulation_steps, global_step = 2, 0

for step in range(4):
    latents, ref_image_latents = torch.randn(2, TOKENS, 4), torch.randn(2, TOKENS, 4)
    tgt_pose_img, noise = torch.randn(2, TOKENS, 3), torch.randn(2, TOKENS, 4)
    model_pred = net(latents + noise, ref_image_latents, tgt_pose_img)
    loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean") / gradient_accumulation_steps
    loss.backward()  # expect: raises frees
    sync_gradients = (step + 1) % gradient_accumulation_steps == 0
    if sync_gradients:
        torch.nn.utils.clip_grad_norm_(trainable_params, 1.0)
        optimizer.step(); optimizer.zero_grad()
    if sync_gradients:
        reference_control_reader.clear()
        reference_control_writer.clear()
        global_step += 1; print("step", global_step, "loss", loss.item())
